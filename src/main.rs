//! The `fairlead` command: parses the command line and hands over to the crate that owns the
//! subcommand. No logic lives here; each area adds its subcommand as one enum variant.

#![doc = "fairlead: Deckhouse service-with-healthchecks and ALB modules, one binary."]

mod bench;

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
    Up(fairlead_compose::up::UpArgs),
    /// The service-with-healthchecks module.
    #[command(subcommand)]
    Health(fairlead_health::cli::HealthCommand),
    /// The ALB: the xDS control plane and Envoy bootstraps.
    #[command(subcommand)]
    Edge(fairlead_edge_cli::EdgeCommand),
    /// Print the Gateway API relationship graph of the cluster a kubeconfig reaches (JSON,
    /// DOT or Mermaid).
    Graph(fairlead_graph_service::cli::GraphArgs),
    /// Run a k6 scenario of loadtests/ against an ALB (against `fairlead up`: with the world
    /// and echo backends it needs); exits with k6's code.
    Loadtest(fairlead_loadtest::Args),
    /// Serve an echo backend of loadtests/ (what `fairlead loadtest` starts for `fairlead
    /// up`; `--cluster-world` runs it in a cluster).
    Echo(fairlead_loadtest::EchoArgs),
    /// Measure speed and memory; prints a table.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Become PROGRAM, killed when the process PARENT dies (how the proxy supervisor runs
    /// Envoy, so an Envoy never outlives it).
    #[command(hide = true)]
    ExecChild {
        /// The pid of the process this one must not outlive.
        #[arg(long)]
        parent: i32,
        /// The program and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
}

/// The variable naming the process a fairlead process must not outlive (`fairlead up`'s
/// runner sets it for the pods it runs).
const PARENT_PID: &str = "FAIRLEAD_PARENT_PID";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let exec_child = matches!(cli.command, Command::ExecChild { .. });
    if let Some(parent) = std::env::var(PARENT_PID).ok().and_then(|p| p.parse().ok())
        && !exec_child
    {
        // Asked to end with the parent: a SIGTERM when it dies, so this process drains.
        fairlead_kit::process::die_with_parent(fairlead_kit::process::Signal::TERM, parent)?;
    }
    match cli.command {
        Command::ExecChild {
            parent,
            mut command,
        } => {
            let program = command.remove(0);
            Err(fairlead_kit::process::exec_child(parent, program, command).into())
        }
        Command::Version => {
            println!("fairlead {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        Command::Up(args) => fairlead_compose::up::run(&cli.global, args).await,
        Command::Health(command) => fairlead_health::cli::run(&cli.global, command).await,
        Command::Edge(command) => fairlead_edge_cli::run(&cli.global, command).await,
        Command::Graph(args) => fairlead_graph_service::cli::run(args).await,
        Command::Bench(command) => bench::run(command).await,
        Command::Loadtest(args) => std::process::exit(fairlead_loadtest::run(args).await?),
        Command::Echo(args) => fairlead_loadtest::echo(args).await,
    }
}
