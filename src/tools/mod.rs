//! OpenTSDB's `tsdb` command-line tools as `rtsd` subcommands, working on a data directory:
//! * [`import`]: `rtsd import FILE...`, the text import format (also `.gz` and `-` for stdin), bulk-written.
//! * [`query`]: `rtsd query START [END] AGG ... METRIC [TAGS]`, printed as `tsdb query` prints.
//! * `rtsd scan` lives in [`crate::scan`] (raw rows, `--import`, `--delete`).
//! * [`uid`]: `rtsd uid grep|assign|rename|delete|fsck|metasync|treesync|<lookup>` and `rtsd mkmetric`.
//! * [`fsck`]: `rtsd fsck`, the data table check with OpenTSDB's repair flags.
//!
//! Reading tools open the directory read-only, so they also work while a daemon serves it (they see the data
//! as of their start). Writing tools need the directory to themselves: RocksDB allows one writer, so while a
//! daemon runs they say so, except `rtsd import`, which then sends its points through the daemon's
//! `/api/put` (see [`import`]).
pub mod fsck;
pub mod import;
pub mod query;
pub mod uid;

use std::sync::Arc;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::config::Config;
use crate::metrics::Metrics;
use crate::store::{Store, StoreError};

/// Why a tool could not open its data directory.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Another process (a running daemon) holds RocksDB's lock.
    #[error(
        "data directory {dir} is in use by a running rtsd (RocksDB allows one writer); stop the daemon first{hint}"
    )]
    Locked { dir: String, hint: &'static str },
    #[error("cannot open data directory {dir}: {source}")]
    Store { dir: String, source: StoreError },
}

/// Opens the data directory for writing; a held lock becomes [`OpenError::Locked`] with `hint` appended.
pub fn open_writable(config: &Config, hint: &'static str) -> Result<Store, OpenError> {
    let dir = config.data_dir.display().to_string();
    Store::open(&config.store_options(), Arc::new(Metrics::new())).map_err(|source| {
        if is_lock_error(&source) {
            OpenError::Locked { dir, hint }
        } else {
            OpenError::Store { dir, source }
        }
    })
}

/// Opens the data directory read-only (works beside a running daemon).
pub fn open_read_only(config: &Config) -> Result<Store, OpenError> {
    Store::open_read_only(&config.store_options(), Arc::new(Metrics::new()))
        .map_err(|source| OpenError::Store { dir: config.data_dir.display().to_string(), source })
}

/// Whether a store error is RocksDB failing to take the directory's `LOCK` file.
pub fn is_lock_error(e: &StoreError) -> bool {
    let text = e.to_string();
    text.contains("LOCK") && (text.contains("lock") || text.contains("Resource temporarily unavailable"))
}

pub use crate::timefmt::now_ms;

/// A progress bar on stderr when stderr is a terminal, hidden otherwise (logs and pipes stay clean). `len` 0
/// gives a spinner with a counter.
pub fn progress(len: u64, unit: &str) -> ProgressBar {
    let bar = if len > 0 { ProgressBar::new(len) } else { ProgressBar::new_spinner() };
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(5));
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    let template = if len > 0 {
        format!(
            "{{spinner}} [{{elapsed_precise}}] {{wide_bar}} {{pos}}/{{len}} {unit} ({{per_sec}}, ETA {{eta}}) {{msg}}"
        )
    } else {
        format!("{{spinner}} [{{elapsed_precise}}] {{pos}} {unit} ({{per_sec}}) {{msg}}")
    };
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar
}
