//! `fairlead graph`: the graph of whatever cluster a kubeconfig reaches, printed as JSON,
//! DOT or Mermaid, for people who like gwctl. It lists each kind once (at the version the
//! cluster serves) with the caller's own rights; a kind the caller may not list, or the
//! cluster does not serve, is said on stderr and left out.

use std::time::SystemTime;

use anyhow::Context as _;
use fairlead_edge_model::input::Input;
use fairlead_edge_model::kinds::KINDS;
use fairlead_graph::filter::{Filter, view};
use fairlead_graph::world::{GATEWAY_LABEL, World, read};
use fairlead_graph::{Health, NodeId, render};
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::Discovery;

/// Options of `fairlead graph`.
#[derive(Debug, clap::Args)]
pub struct GraphArgs {
    /// How to reach the cluster.
    #[command(flatten)]
    pub cluster: fairlead_kit::cluster::ClusterArgs,
    /// Output: json (Cytoscape-shaped, as the API serves), dot (Graphviz) or mermaid.
    #[arg(short = 'o', long, default_value = "json", value_parser = ["json", "dot", "mermaid"])]
    pub output: String,
    /// Only this namespace (and the cluster-scoped objects next to it).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Only what is within --depth edges of this node (`group/kind/namespace/name`).
    #[arg(long)]
    pub root: Option<String>,
    /// The depth of the walk from --root.
    #[arg(long, requires = "root")]
    pub depth: Option<usize>,
    /// Only these kinds (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub kinds: Vec<String>,
    /// Only nodes of these healths (comma-separated: healthy, degraded, failing, unknown).
    #[arg(long, value_delimiter = ',')]
    pub health: Vec<String>,
}

/// What is listed besides the index's kinds: `(group, kind, label selector)`.
const MORE: &[(&str, &str, Option<&str>)] = &[
    ("network.deckhouse.io", "ServiceWithHealthchecks", None),
    ("apps", "Deployment", Some(GATEWAY_LABEL)),
    ("apps", "DaemonSet", Some(GATEWAY_LABEL)),
];

/// Prints the graph.
pub async fn run(args: GraphArgs) -> anyhow::Result<()> {
    let filter = Filter {
        namespace: args.namespace.clone(),
        root: args
            .root
            .as_deref()
            .map(NodeId::parse)
            .transpose()
            .context("--root")?,
        depth: args.depth,
        kinds: args.kinds.iter().cloned().collect(),
        health: args
            .health
            .iter()
            .map(|h| {
                Health::parse(h).with_context(|| {
                    format!("--health: {h:?} is not healthy, degraded, failing or unknown")
                })
            })
            .collect::<anyhow::Result<_>>()?,
    };
    let client = args.cluster.client().await?;
    let groups: Vec<&str> = KINDS
        .iter()
        .map(|k| k.group)
        .chain(MORE.iter().map(|m| m.0))
        .collect();
    let discovery = Discovery::new(client.clone())
        .filter(&groups)
        .run()
        .await
        .context("API discovery")?;
    let mut input = Input::default();
    let mut world = World::default();
    let wanted = KINDS
        .iter()
        .map(|k| (k.group, k.kind, None))
        .chain(MORE.iter().copied());
    for (group, kind, labels) in wanted {
        let Some((resource, _)) = discovery.get(group).and_then(|g| g.recommended_kind(kind))
        else {
            continue;
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let mut params = ListParams::default();
        if let Some(labels) = labels {
            params = params.labels(labels);
        }
        if kind == "Secret" {
            params = params.fields("type=kubernetes.io/tls");
        }
        let list = match api.list(&params).await {
            Ok(list) => list,
            Err(e) => {
                eprintln!("fairlead graph: not drawing {kind}s: {e}");
                continue;
            }
        };
        for object in list.items {
            let mut value = serde_json::to_value(&object)?;
            value["kind"] = kind.into();
            if let Err(e) = read(&mut input, &mut world, value) {
                eprintln!("fairlead graph: skipping: {e}");
            }
        }
    }
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)?
        .as_secs();
    let graph = fairlead_graph::build(&input, &world, i64::try_from(now)?);
    let graph = view(&graph, &|_| true, &filter)?;
    let out = match args.output.as_str() {
        "dot" => render::dot(&graph),
        "mermaid" => render::mermaid(&graph),
        _ => serde_json::to_string_pretty(&render::json(&graph))? + "\n",
    };
    print!("{out}");
    Ok(())
}
