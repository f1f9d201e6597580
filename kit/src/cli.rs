//! Command-line options shared by every subcommand: log format and level.

use clap::{Args, ValueEnum};

/// How log lines are written to standard error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable text when standard error is a terminal, JSON otherwise (in a cluster).
    #[default]
    Auto,
    /// Human-readable text.
    Text,
    /// One JSON object per line.
    Json,
}

impl LogFormat {
    /// Resolves [`LogFormat::Auto`] against whether standard error is a terminal.
    pub fn resolve(self, stderr_is_terminal: bool) -> LogFormat {
        match self {
            LogFormat::Auto if stderr_is_terminal => LogFormat::Text,
            LogFormat::Auto => LogFormat::Json,
            other => other,
        }
    }
}

/// Options every `fairlead` subcommand accepts, flattened into the top-level parser.
#[derive(Clone, Debug, Default, Args)]
pub struct GlobalArgs {
    /// Log format: text on a terminal, JSON in clusters (`auto` picks by whether stderr is a TTY).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Auto)]
    pub log_format: LogFormat,

    /// Log filter in `RUST_LOG` syntax (e.g. `info,fairlead_kit=debug`); `RUST_LOG` is used
    /// when this is not given, and `info` when neither is.
    #[arg(long, global = true, value_parser = parse_log_filter)]
    pub log_level: Option<String>,
}

/// Checks a log filter at parse time, so a typo is a usage error (exit code 2), not a crash.
fn parse_log_filter(text: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::builder()
        .parse(text)
        .map(|_| text.to_owned())
        .map_err(|err| format!("not a log filter ({err}); try `info` or `info,fairlead_kit=debug`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_filters_are_checked() {
        assert!(parse_log_filter("info,fairlead_kit=debug").is_ok());
        assert!(parse_log_filter("info,[[").is_err());
    }

    #[test]
    fn auto_format_follows_the_terminal() {
        assert_eq!(LogFormat::Auto.resolve(true), LogFormat::Text);
        assert_eq!(LogFormat::Auto.resolve(false), LogFormat::Json);
        assert_eq!(LogFormat::Json.resolve(true), LogFormat::Json);
        assert_eq!(LogFormat::Text.resolve(false), LogFormat::Text);
    }
}
