//! Hot reload on one gateway: a rule file watched for changes, each change checked as a whole
//! and swapped in atomically, or refused with its mistakes while the old rules stay.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use tollgate_core::Store;
use tollgate_tower::RateLimitLayer;

use crate::error::ConfigErrors;
use crate::file::RuleFile;
use crate::key::Extractors;
use crate::sources::{RuleOverlay, Sources};
use crate::status::WatchStatus;

/// How long a burst of file events must be quiet before the file is read: editors and
/// ConfigMap updates write in several steps.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// Why watching could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatchError {
    /// The file could not be read.
    #[error("cannot read rule file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The file has mistakes: a gateway does not start on a bad rule file.
    #[error("{0}")]
    Invalid(ConfigErrors),
    /// The file system cannot be watched.
    #[error("cannot watch rule file {path}: {source}")]
    Watch {
        /// The file.
        path: PathBuf,
        /// What notify said.
        source: notify::Error,
    },
}

/// A rule file watched for changes, feeding one layer's rules.
///
/// The directory holding the file is watched, so a file replaced by an atomic rename, or
/// through a symlink swap as Kubernetes ConfigMaps do, is seen like one edited in place. After
/// a change (debounced by 100 ms) the whole file is read and checked: valid rules replace the
/// layer's in one atomic swap (every request is decided wholly by the old rules or wholly by
/// the new; callers' state carries over, see `tollgate_core::algorithm` on quota changes; a
/// rule whose algorithm changes family starts afresh); a file with mistakes is refused, logged
/// at `error` on target `tollgate::config` with each mistake's line and column, and kept as
/// [`status`](RuleWatcher::status)'s `last_error`, while the rules in force stay.
///
/// Only events about the file itself (or a `..`-named entry, the data directory a ConfigMap
/// swaps) count, and reads do not: the watcher's own reads and a busy log beside the file never
/// wake it. Watch the layer value the router is built with (or a clone of it): the swap reaches
/// the services made from it. Dropping the watcher stops watching. The directory is watched as
/// it was when the watcher started: replacing the whole directory (renaming another into its
/// place) is not followed; call [`reload`](RuleWatcher::reload) or restart the watcher then.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use tollgate_core::MemoryStore;
/// use tollgate_tower::RateLimitLayer;
/// use tollgate_config::{Extractors, RuleWatcher};
///
/// let layer = RateLimitLayer::new(MemoryStore::new());
/// let watcher = RuleWatcher::start("/etc/chirp/rules.toml", Extractors::new(), &layer)?;
/// // ... serve with `layer` ...
/// println!("rules version {:?}", watcher.status().version);
/// # Ok(()) }
/// ```
pub struct RuleWatcher {
    shared: Arc<Shared>,
    _watcher: RecommendedWatcher,
    task: JoinHandle<()>,
}

struct Shared {
    path: PathBuf,
    sources: Arc<Sources>,
}

impl RuleWatcher {
    /// Loads `path` into `layer` (an error if it cannot be read or has mistakes, a rule asking
    /// what the layer's store cannot do among them, at the field that asks: see
    /// [`RuleFile::install`](crate::RuleFile::install)) and watches it.
    /// Needs a tokio runtime.
    pub fn start<St: Store>(
        path: impl AsRef<Path>,
        extractors: Extractors,
        layer: &RateLimitLayer<St>,
    ) -> Result<RuleWatcher, WatchError> {
        let path = path.as_ref().to_path_buf();
        let shared = Arc::new(Shared {
            path: path.clone(),
            sources: Arc::new(Sources::new(extractors, layer.handle())),
        });
        // Watch first, then read: a change made while starting is seen, not lost.
        let (changed, mut changes) = mpsc::unbounded_channel::<()>();
        let file_name = path.file_name().map(std::ffi::OsStr::to_os_string);
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let Ok(event) = event else {
                    let _ = changed.send(());
                    return;
                };
                if concerns(&event, file_name.as_deref()) {
                    let _ = changed.send(());
                }
            })
            .map_err(|source| WatchError::Watch {
                path: path.clone(),
                source,
            })?;
        let directory = path
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        watcher
            .watch(directory, RecursiveMode::NonRecursive)
            .map_err(|source| WatchError::Watch {
                path: path.clone(),
                source,
            })?;
        match shared.load() {
            Ok(_) => {}
            Err(Failure::Read(source)) => return Err(WatchError::Read { path, source }),
            Err(Failure::Invalid(errors)) => return Err(WatchError::Invalid(errors)),
        }
        let reloading = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            while changes.recv().await.is_some() {
                // Debounce: wait until the events stop for a moment.
                loop {
                    tokio::time::sleep(DEBOUNCE).await;
                    let mut more = false;
                    while changes.try_recv().is_ok() {
                        more = true;
                    }
                    if !more {
                        break;
                    }
                }
                // Reading and checking the file blocks: off the runtime's workers.
                let load = Arc::clone(&reloading);
                let _ = tokio::task::spawn_blocking(move || load.load()).await;
            }
        });
        Ok(RuleWatcher {
            shared,
            _watcher: watcher,
            task,
        })
    }

    /// Reads and applies the file now (SIGHUP, an admin request): `Ok` when the rules in force
    /// are the file's, the mistakes when it was refused (the old rules stay).
    pub fn reload(&self) -> Result<(), ConfigErrors> {
        match self.shared.load() {
            Ok(_) => Ok(()),
            Err(Failure::Invalid(errors)) => Err(errors),
            Err(Failure::Read(error)) => Err(ConfigErrors::unreadable(&self.shared.path, &error)),
        }
    }

    /// Where the file stands.
    pub fn status(&self) -> WatchStatus {
        self.shared.status()
    }

    /// The rules in force — the file with the fleet document over it — as one TOML file, which
    /// loads again to the same rules (see [`RuleFile::to_toml`]).
    pub fn to_toml(&self) -> String {
        self.shared.sources.to_toml()
    }

    /// Calls `follower` with the rules in force — the file with the fleet document over it —
    /// now and after every change installed from now on (a refused change calls nothing): how
    /// something beside the layer follows the same file, such as `tollgate-envoy`'s rate limit
    /// service, which reads the file's rules for Envoy's descriptors. It runs while the change
    /// is installed: keep it short, and do not call back into this watcher from it.
    ///
    /// ```
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("rules.toml");
    /// # std::fs::write(&path, "[[rule]]\nid = \"reads\"\nalgorithm = \"fixed_window\"\nlimit = 50\nwindow = \"1s\"\nkey = \"peer_ip\"\n")?;
    /// use std::sync::{Arc, Mutex};
    /// use tollgate_core::MemoryStore;
    /// use tollgate_tower::RateLimitLayer;
    /// use tollgate_config::{Extractors, RuleWatcher};
    ///
    /// let layer = RateLimitLayer::new(MemoryStore::new());
    /// let watcher = RuleWatcher::start(&path, Extractors::new(), &layer)?;
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let follower = Arc::clone(&seen);
    /// watcher.on_install(move |file| follower.lock().unwrap().push(file.ids().count()));
    /// watcher.overlay().apply("2", "[[rule]]\nid = \"writes\"\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1s\"\nkey = \"peer_ip\"\n")?;
    /// assert_eq!(*seen.lock().unwrap(), [1, 2]); // at once, then the file with the document over it
    /// # Ok(()) }
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(run()).unwrap();
    /// ```
    pub fn on_install(&self, follower: impl Fn(&RuleFile) + Send + Sync + 'static) {
        self.shared.sources.follow(Box::new(follower));
    }

    /// A handle that puts a fleet document over this file (see [`RuleOverlay`] for the
    /// precedence).
    pub fn overlay(&self) -> RuleOverlay {
        RuleOverlay {
            sources: Arc::clone(&self.shared.sources),
        }
    }
}

impl Drop for RuleWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for RuleWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuleWatcher")
            .field("path", &self.shared.path)
            .field("status", &self.shared.status())
            .finish_non_exhaustive()
    }
}

/// Whether a file event may have changed the watched file: not a mere read (the watcher's own
/// reads would wake it again), and about the file itself or a `..`-named entry (the symlinked
/// data directory a Kubernetes ConfigMap swaps). Other files of the directory are ignored, so a
/// busy neighbour (a log) cannot hold reloads back.
fn concerns(event: &notify::Event, file_name: Option<&std::ffi::OsStr>) -> bool {
    if matches!(event.kind, notify::EventKind::Access(_)) {
        return false;
    }
    event.paths.iter().any(|path| {
        path.file_name()
            .is_some_and(|name| Some(name) == file_name || name.to_string_lossy().starts_with(".."))
    })
}

/// Why a load did not apply.
enum Failure {
    Read(io::Error),
    Invalid(ConfigErrors),
}

impl Shared {
    fn status(&self) -> WatchStatus {
        self.sources.lock().status.clone()
    }

    /// Reads, checks and (when valid and changed) applies the file; records the outcome.
    fn load(&self) -> Result<bool, Failure> {
        // Read under the lock, so two loads at once apply in the order they read.
        let mut state = self.sources.lock();
        let status = &mut state.status;
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::error!(target: "tollgate::config", path = %self.path.display(), %error, "cannot read the rule file; the rules in force stay");
                status.last_error = Some(ConfigErrors::unreadable(&self.path, &error));
                self.sources.count_load(false);
                return Err(Failure::Read(error));
            }
        };
        let version = fingerprint(&bytes);
        if status.version.as_deref() == Some(version.as_str()) {
            status.last_error = None;
            return Ok(false);
        }
        let text = String::from_utf8_lossy(&bytes);
        let name = self.path.display().to_string();
        let parsed = RuleFile::parse(&name, &text, &self.sources.extractors)
            .and_then(|file| self.sources.set_local(&mut state, file));
        let status = &mut state.status;
        match parsed {
            Ok(()) => {
                status.version = Some(version);
                status.last_error = None;
                self.sources.count_load(true);
                tracing::info!(target: "tollgate::config", path = %name, version = state.status.version.as_deref().unwrap_or(""), overridden_by_fleet = ?state.status.overridden, "rule file loaded");
                Ok(true)
            }
            Err(errors) => {
                self.sources.count_load(false);
                tracing::error!(target: "tollgate::config", path = %name, "rule file refused, the rules in force stay:\n{errors}");
                status.last_error = Some(errors.clone());
                Err(Failure::Invalid(errors))
            }
        }
    }
}

/// 16 hex digits of a hash of the file's bytes (to see whether it changed, not a secret).
fn fingerprint(bytes: &[u8]) -> String {
    let mut hasher = DefaultHasher::new();
    bytes.hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}
