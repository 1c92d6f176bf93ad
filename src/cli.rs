//! The `rtsd` command line: `serve` runs the daemon; `scan` prints stored points.
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use crate::config::{Config, Flags};
use crate::metrics::Metrics;
use crate::store::Store;

#[derive(Parser)]
#[command(name = "rtsd", version, about = "A time-series daemon that speaks OpenTSDB 2.4's protocols")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon: telnet-style put lines and HTTP on one port.
    Serve(Common),
    /// Print stored points. `--import` gives OpenTSDB's import format, as `tsdb scan --import` does.
    Scan {
        #[command(flatten)]
        common: Common,
        /// Print in OpenTSDB's import format (`metric timestamp value tag=value ...`).
        #[arg(long)]
        import: bool,
        /// START [END] AGG [rate] [downsample N FUNC] METRIC [TAG=VALUE ...]
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
        query: Vec<String>,
    },
}

#[derive(Args, Clone)]
struct Common {
    /// An OpenTSDB-style properties file (tsd.* and rtsd.* keys). Without it, the shipped rtsd.conf applies.
    #[arg(long)]
    config: Option<PathBuf>,
    /// tsd.network.port
    #[arg(long)]
    port: Option<u16>,
    /// tsd.network.bind
    #[arg(long)]
    bind: Option<String>,
    /// rtsd.data_dir (default ./rtsd-data)
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Set any property: --set tsd.core.auto_create_metrics=false (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

impl Common {
    fn config(&self) -> Result<Config, String> {
        let mut set = Vec::new();
        for kv in &self.set {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("--set expects KEY=VALUE, got {kv:?}"))?;
            set.push((k.trim().to_string(), v.trim().to_string()));
        }
        let flags = Flags {
            config: self.config.clone(),
            port: self.port,
            bind: self.bind.clone(),
            data_dir: self.data_dir.clone(),
            set,
        };
        Config::load(&flags).map_err(|e| e.to_string())
    }
}

/// Parses the command line and runs it; the `rtsd` binary is this function.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let result = match cli.command {
        Command::Serve(common) => serve(&common),
        Command::Scan { common, import, query } => scan(&common, import, &query),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rtsd: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(common: &Common) -> Result<(), String> {
    let config = common.config()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(crate::daemon::run(config)).map_err(|e| e.to_string())
}

fn scan(common: &Common, import: bool, query: &[String]) -> Result<(), String> {
    if !import {
        return Err("only the --import form of scan is implemented so far: rtsd scan --import START [END] AGG METRIC [TAG=VALUE ...]".into());
    }
    let config = common.config()?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let q = crate::scan::parse_args(query, now_ms)?;
    let store = Store::open_read_only(&config, Arc::new(Metrics::new()))
        .map_err(|e| format!("cannot open data directory {}: {e}", config.data_dir.display()))?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    crate::scan::scan_import(&store, &q, &mut out).map_err(|e| e.to_string())?;
    std::io::Write::flush(&mut out).map_err(|e| e.to_string())?;
    Ok(())
}
