//! `fairlead health …`: the CRD, the agent (DaemonSet) and the controller (Deployment).

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Subcommand};
use fairlead_kit::lease::LeaseConfig;
use fairlead_kit::shutdown::DEFAULT_DRAIN_DEADLINE;
use fairlead_kit::{GlobalArgs, Runtime};

use crate::{agent, controller, start};

/// The health module's commands.
#[derive(Debug, Subcommand)]
pub enum HealthCommand {
    /// Print the ServiceWithHealthchecks CRD (YAML), generated from the Rust types.
    Crd,
    /// Print the components' RBAC (YAML): the chart's `templates/rbac.yaml`, from the rules
    /// of `fairlead_health::rbac`.
    Rbac,
    /// Run the agent of one node: probe its pods and publish EndpointSlices and statuses.
    Agent(AgentArgs),
    /// Run the controller: child Services, Ready condition, cleanup (leader-elected).
    Controller(ControllerArgs),
}

/// Options of `fairlead health agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// How to reach the cluster.
    #[command(flatten)]
    pub cluster: fairlead_kit::cluster::ClusterArgs,
    /// This node's name (the DaemonSet passes `spec.nodeName`).
    #[arg(long, env = "NODE_NAME")]
    node_name: String,
    /// Address of the admin server (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "0.0.0.0:9874")]
    admin_addr: SocketAddr,
    /// A health-only server (/healthz, /readyz) for the kubelet's probes, when the admin
    /// server stays on loopback behind kube-rbac-proxy.
    #[arg(long)]
    health_addr: Option<SocketAddr>,
    /// Probes running at once.
    #[arg(long, default_value_t = 256)]
    concurrency: usize,
    /// Write `lastProbeTime` on every probe (more API load), not only on transitions.
    #[arg(long)]
    verbose_status: bool,
}

/// Options of `fairlead health controller`.
#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// How to reach the cluster.
    #[command(flatten)]
    pub cluster: fairlead_kit::cluster::ClusterArgs,
    /// Address of the admin server (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "0.0.0.0:4250")]
    admin_addr: SocketAddr,
    /// A health-only server (/healthz, /readyz) for the kubelet's probes, when the admin
    /// server stays on loopback behind kube-rbac-proxy.
    #[arg(long)]
    health_addr: Option<SocketAddr>,
    /// Namespace of the leader-election Lease.
    #[arg(
        long,
        env = "POD_NAMESPACE",
        default_value = "d8-service-with-healthchecks"
    )]
    lease_namespace: String,
    /// This replica's identity in the Lease.
    #[arg(long, env = "POD_NAME", default_value = "fairlead-health-controller")]
    identity: String,
}

/// Runs a health command.
pub async fn run(global: &GlobalArgs, command: HealthCommand) -> anyhow::Result<()> {
    match command {
        HealthCommand::Crd => {
            print!("{}", serde_yaml_ng::to_string(&fairlead_health_api::crd())?);
            Ok(())
        }
        HealthCommand::Rbac => {
            print!(
                "{}",
                fairlead_kit::rbac::yaml_stream(&crate::rbac::objects(crate::rbac::NAMESPACE))?
            );
            Ok(())
        }
        HealthCommand::Agent(args) => {
            let (runtime, client) = connect(
                global,
                &args.cluster,
                "fairlead-health-agent",
                args.admin_addr,
                args.health_addr,
            )
            .await?;
            let settings = agent::Settings {
                node: args.node_name,
                concurrency: args.concurrency,
                verbose_status: args.verbose_status,
            };
            start::agent(&runtime, client, settings)?;
            runtime.finish().await;
            Ok(())
        }
        HealthCommand::Controller(args) => {
            let (runtime, client) = connect(
                global,
                &args.cluster,
                "fairlead-health-controller",
                args.admin_addr,
                args.health_addr,
            )
            .await?;
            let lease = LeaseConfig {
                lease_duration: Duration::from_secs(15),
                ..LeaseConfig::new(controller::LEASE, &args.lease_namespace, &args.identity)
            };
            start::controller(&runtime, client, start::ControllerSettings { lease }).await?;
            runtime.finish().await;
            Ok(())
        }
    }
}

/// What both components start with: the runtime, a client for the cluster `cluster` names,
/// and the admin server.
async fn connect(
    global: &GlobalArgs,
    cluster: &fairlead_kit::cluster::ClusterArgs,
    component: &str,
    admin_addr: SocketAddr,
    health_addr: Option<SocketAddr>,
) -> anyhow::Result<(Runtime, kube::Client)> {
    let runtime = Runtime::start(global, component, DEFAULT_DRAIN_DEADLINE)?;
    let client = cluster.client().await?;
    runtime.serve_admin(admin_addr, health_addr, None).await?;
    Ok((runtime, client))
}
