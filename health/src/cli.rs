//! `fairlead health …`.

use clap::Subcommand;

/// The health module's commands.
#[derive(Debug, Subcommand)]
pub enum HealthCommand {
    /// Print the ServiceWithHealthchecks CRD (YAML), generated from the Rust types.
    Crd,
}

/// Runs a health command.
pub async fn run(command: HealthCommand) -> anyhow::Result<()> {
    match command {
        HealthCommand::Crd => {
            print!("{}", serde_yaml_ng::to_string(&fairlead_health_api::crd())?);
            Ok(())
        }
    }
}
