//! `fairlead bench …`: benchmarks that print a table (figures for BENCHMARKS.md).

use clap::{Args, Subcommand};

/// What to benchmark.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The embedded API server: create and list throughput, watch fan-out, memory per object.
    Apiserver(ApiserverArgs),
    /// The health module: probe throughput against the machine's ceiling, withdrawal time.
    Health(HealthArgs),
}

/// Options of `fairlead bench health`.
#[derive(Debug, Args)]
pub struct HealthArgs {
    /// Probes per throughput figure.
    #[arg(long, default_value_t = 20_000)]
    probes: usize,
    /// Probes in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Withdrawal trials.
    #[arg(long, default_value_t = 10)]
    trials: usize,
    /// Which figures to measure (all when not given).
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<HealthPart>,
}

/// The figures of `fairlead bench health`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum HealthPart {
    /// TCP and HTTP probes per second against the machine's ceiling.
    Throughput,
    /// Time from a port failing to its slice dropping the pod.
    Withdrawal,
    /// Agent RSS at 1k and 10k targets.
    Rss,
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
        BenchCommand::Health(args) => {
            use fairlead_health::bench;
            let options = bench::Options {
                probes: args.probes,
                concurrency: args.concurrency,
                trials: args.trials,
            };
            let wanted = |part| args.only.is_empty() || args.only.contains(&part);
            let mut rows = Vec::new();
            if wanted(HealthPart::Throughput) {
                rows.extend(tokio::task::spawn_blocking(move || bench::throughput(options)).await?);
            }
            if wanted(HealthPart::Withdrawal) {
                rows.push(bench::withdrawal(options).await?);
            }
            if wanted(HealthPart::Rss) {
                for targets in [1_000, 10_000] {
                    rows.push(bench::agent_rss(targets).await?);
                }
            }
            let rows: Vec<fairlead_apiserver::bench::Row> = rows
                .into_iter()
                .map(|r| fairlead_apiserver::bench::Row {
                    metric: r.metric,
                    value: r.value,
                })
                .collect();
            print!("{}", fairlead_apiserver::bench::table(&rows));
        }
    }
    Ok(())
}
