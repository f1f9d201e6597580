//! `fairlead edge ingress2gateway`: the ingress-nginx converter on a file (or stdin), as the
//! gateway controller's endpoint serves it.

use std::io::Read as _;

use anyhow::Context as _;
use clap::Args;
use fairlead_edge_migrate::{Options, Scope};
use fairlead_edge_model::ObjectKey;

/// Options of `fairlead edge ingress2gateway`.
#[derive(Debug, Args)]
pub struct Ingress2gatewayArgs {
    /// The Ingresses, Services and DexAuthenticators (one object, a List, or multi-document
    /// YAML; `-` reads stdin), e.g. `kubectl get ingress,service -A -o yaml`.
    #[arg(short = 'f', long)]
    pub filename: String,
    /// The ALB instance's Gateway the ListenerSets name, `namespace/name`.
    #[arg(long, default_value = "d8-alb/public-gw", value_parser = super::gateway)]
    pub gateway: ObjectKey,
    /// `cluster` (a ClusterALBInstance's Gateway) or `namespaced` (an ALBInstance's).
    #[arg(long, default_value = "cluster")]
    pub scope: Scope,
    /// The ingress class converted.
    #[arg(long, default_value = "nginx")]
    pub ingress_class: String,
}

/// Prints the conversion of `args.filename`.
pub fn run(args: &Ingress2gatewayArgs) -> anyhow::Result<()> {
    let body = if args.filename == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading stdin")?;
        text
    } else {
        std::fs::read_to_string(&args.filename)
            .with_context(|| format!("reading {}", args.filename))?
    };
    let inputs = fairlead_edge_migrate::read(&body).with_context(|| args.filename.clone())?;
    let options = Options {
        gateway: args.gateway.clone(),
        scope: args.scope,
        ingress_class: args.ingress_class.clone(),
    };
    print!(
        "{}",
        fairlead_edge_migrate::convert(&inputs, &options).yaml()
    );
    Ok(())
}
