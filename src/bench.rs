//! `fairlead bench …`: benchmarks that print a table (figures for BENCHMARKS.md).

use clap::{Args, Subcommand};

/// What to benchmark.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The embedded API server: create and list throughput, watch fan-out, memory per object.
    Apiserver(ApiserverArgs),
}

/// Options of `fairlead bench apiserver`.
#[derive(Debug, Args)]
pub struct ApiserverArgs {
    /// Objects to create (and hold for the memory figure).
    #[arg(long, default_value_t = 10_000)]
    objects: usize,
    /// Concurrent creating clients.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Watchers for the fan-out latency.
    #[arg(long, default_value_t = 100)]
    watchers: usize,
    /// Fan-out rounds.
    #[arg(long, default_value_t = 20)]
    rounds: usize,
}

/// Runs a benchmark and prints its table.
pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Apiserver(args) => {
            let rows = fairlead_apiserver::bench::run(fairlead_apiserver::bench::Options {
                objects: args.objects,
                concurrency: args.concurrency,
                watchers: args.watchers,
                rounds: args.rounds,
            })
            .await?;
            print!("{}", fairlead_apiserver::bench::table(&rows));
        }
    }
    Ok(())
}
