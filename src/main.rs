//! The `fairlead` command: parses the command line and hands over to the crate that owns the
//! subcommand. No logic lives here; each area adds its subcommand as one enum variant.

#![doc = "fairlead: Deckhouse service-with-healthchecks and ALB modules, one binary."]

mod bench;
mod runner;
mod up;

use clap::{Parser, Subcommand};

/// jemalloc returns freed memory to the system over time, so a component's resident memory
/// follows what it holds rather than its high-water mark (the initial lists of large watches).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
use fairlead_kit::GlobalArgs;

/// fairlead: ServiceWithHealthchecks and an Envoy Application Load Balancer for Kubernetes,
/// observability first.
#[derive(Debug, Parser)]
#[command(name = "fairlead", version, propagate_version = true)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the version and exit.
    Version,
    /// Run the whole appliance on this machine, against its embedded default.
    Up(up::UpArgs),
    /// The service-with-healthchecks module.
    #[command(subcommand)]
    Health(fairlead_health::cli::HealthCommand),
    /// The ALB: the xDS control plane and Envoy bootstraps.
    #[command(subcommand)]
    Edge(fairlead_edge_cli::EdgeCommand),
    /// Measure speed and memory; prints a table.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("fairlead {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        Command::Up(args) => up::run(&cli.global, args).await,
        Command::Health(command) => fairlead_health::cli::run(&cli.global, command).await,
        Command::Edge(command) => fairlead_edge_cli::run(&cli.global, command).await,
        Command::Bench(command) => bench::run(command).await,
    }
}
