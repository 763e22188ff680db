//! The rules in force on one gateway: its own rule file, overridden by a fleet document when
//! one is in force, merged and swapped into the layer as one rule set.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use tollgate_core::{RuleId, Store};
use tollgate_tower::LayerHandle;

use crate::error::ConfigErrors;
use crate::file::RuleFile;
use crate::key::Extractors;
use crate::status::WatchStatus;

/// The two sources and the layer they are given to.
pub(super) struct Sources {
    pub(super) extractors: Extractors,
    /// The layer: where the rules go, its registry (where `[[limit]]` quotas go), its store's
    /// names, and whether it records metrics now (it may be turned on after the watcher starts).
    layer: LayerHandle,
    state: Mutex<State>,
    /// Told of the rules in force after every install ([`RuleWatcher::on_install`](super::RuleWatcher::on_install)).
    followers: Mutex<Vec<Follower>>,
}

/// What is told of the rules in force, merged, after every install.
pub(super) type Follower = Box<dyn Fn(&RuleFile) + Send + Sync>;

#[derive(Default)]
pub(super) struct State {
    local: Option<RuleFile>,
    overlay: Option<RuleFile>,
    /// The registry entries the files set (removed again when a file drops them).
    limits_set: Vec<RuleId>,
    pub(super) status: WatchStatus,
}

impl Sources {
    pub(super) fn new(extractors: Extractors, layer: LayerHandle) -> Sources {
        Sources {
            extractors,
            layer,
            state: Mutex::new(State::default()),
            followers: Mutex::new(Vec::new()),
        }
    }

    /// Tells the layer's observers of one load of a rule file or fleet document, `success` or
    /// `error` (counted as `tollgate_config_loads_total` when the layer records metrics).
    pub(super) fn count_load(&self, success: bool) {
        self.layer.rules_loaded(success);
    }

    /// A file's mistakes that only this layer can see: `[[limit]]`s without a registry, and
    /// rules asking what the layer's store cannot do (a store it does not have, a fleet mode
    /// without its wrapper: see `Store::capabilities`).
    pub(super) fn fits(&self, file: &RuleFile) -> Result<(), ConfigErrors> {
        if let (None, Some(errors)) = (self.layer.registry(), file.limits_need_registry()) {
            return Err(errors);
        }
        match file.unsupported(&self.layer.store().capabilities()) {
            Some(errors) => Err(errors),
            None => Ok(()),
        }
    }

    /// The state, locked: loads hold it while they read, check and apply, so two loads at once
    /// apply in the order they read.
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Installs a local file, checked alone, unless it does not fit this layer or conflicts
    /// with the fleet document in force (its mistakes, then; nothing changes).
    pub(super) fn set_local(&self, state: &mut State, file: RuleFile) -> Result<(), ConfigErrors> {
        self.fits(&file)?;
        if let Some(conflicts) = state
            .overlay
            .as_ref()
            .and_then(|overlay| file.overridden_by(overlay).conflicts())
        {
            return Err(conflicts);
        }
        state.local = Some(file);
        self.install(state);
        Ok(())
    }

    /// A fleet document (`name` in messages) read and checked alone and against this layer;
    /// no lock is held while it is read.
    pub(super) fn read_overlay(&self, name: &str, text: &str) -> Result<RuleFile, ConfigErrors> {
        let file = RuleFile::parse(name, text, &self.extractors)?;
        self.fits(&file)?;
        Ok(file)
    }

    /// What putting `overlay` over the local file in force would get wrong.
    pub(super) fn conflicts(state: &State, overlay: &RuleFile) -> Result<(), ConfigErrors> {
        match state
            .local
            .as_ref()
            .and_then(|local| local.overridden_by(overlay).conflicts())
        {
            Some(conflicts) => Err(conflicts),
            None => Ok(()),
        }
    }

    /// Reads a fleet document and, when valid, puts it over the local file; a document with
    /// mistakes is refused and recorded, and the rules in force stay.
    pub(super) fn set_overlay(
        &self,
        version: &str,
        text: &str,
        record_refusal: bool,
    ) -> Result<(), ConfigErrors> {
        let read = self.read_overlay(&format!("fleet document {version}"), text);
        let mut state = self.lock();
        match read.and_then(|file| Sources::conflicts(&state, &file).map(|()| file)) {
            Ok(file) => {
                state.overlay = Some(file);
                state.status.overlay_version = Some(version.to_owned());
                state.status.overlay_error = None;
                self.install(&mut state);
                self.count_load(true);
                tracing::info!(target: "tollgate::config", version, overridden = ?state.status.overridden, "fleet document applied");
                Ok(())
            }
            Err(errors) if record_refusal => {
                self.count_load(false);
                tracing::error!(target: "tollgate::config", version, "fleet document refused, the rules in force stay:\n{errors}");
                state.status.overlay_error = Some(errors.clone());
                Err(errors)
            }
            Err(errors) => Err(errors),
        }
    }

    /// Withdraws the fleet document: the local file alone decides again.
    pub(super) fn clear_overlay(&self) {
        let mut state = self.lock();
        state.status.overlay_error = None;
        if state.overlay.take().is_some() {
            state.status.overlay_version = None;
            self.install(&mut state);
            tracing::info!(target: "tollgate::config", "fleet document withdrawn; the local rule file alone is in force");
        }
    }

    /// The rules in force as one TOML file (the local file overridden by the overlay).
    pub(super) fn to_toml(&self) -> String {
        self.in_force(&self.lock())
            .map(|file| file.to_toml())
            .unwrap_or_default()
    }

    /// The rules in force: the local file overridden by the overlay (`None` before the local
    /// file is loaded).
    fn in_force(&self, state: &State) -> Option<RuleFile> {
        let local = state.local.as_ref()?;
        Some(match &state.overlay {
            Some(overlay) => local.overridden_by(overlay),
            None => local.clone(),
        })
    }

    /// Tells `follower` of the rules in force now, and after every install from now on.
    pub(super) fn follow(&self, follower: Follower) {
        let state = self.lock();
        if let Some(file) = self.in_force(&state) {
            follower(&file);
        }
        self.followers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(follower);
    }

    /// Gives the layer the local file overridden by the overlay (nothing before the local
    /// file is loaded: a gateway starts only on its own valid file).
    fn install(&self, state: &mut State) {
        let Some(local) = &state.local else {
            return;
        };
        let (merged, overridden) = match &state.overlay {
            Some(overlay) => (local.overridden_by(overlay), local.shared_ids(overlay)),
            None => (local.clone(), Vec::new()),
        };
        if let Some(registry) = self.layer.registry() {
            let limits: Vec<RuleId> = merged.limits().map(|(id, _)| id.clone()).collect();
            for (id, quota) in merged.limits() {
                registry.set(id.clone(), *quota);
            }
            for gone in state.limits_set.iter().filter(|id| !limits.contains(id)) {
                registry.remove(gone);
            }
            state.limits_set = limits;
        }
        // `check` found, at their fields, every rule the layer would refuse.
        if let Err(refused) = self.layer.replace_rules(merged.rules().clone()) {
            tracing::error!(target: "tollgate::config", %refused, "rules not installed; the rules in force stay");
            return;
        }
        for follower in self
            .followers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            follower(&merged);
        }
        state.status.overridden = overridden;
        state.status.loaded_at = Some(SystemTime::now());
        state.status.loads += 1;
    }
}

/// A handle that puts a fleet document over a watched rule file
/// ([`RuleWatcher::overlay`](super::RuleWatcher::overlay)); what a fleet follower (such as
/// `tollgate_published`) drives.
///
/// **Precedence:** a rule of the fleet document replaces the file's rule with the same id
/// (quota, key, route, policies — the whole rule), and rules only the document defines are
/// added; every other rule is the file's. A later change of the file applies at once to the
/// rules the document does not define, and not to the ones it does: a file edited on one
/// machine never silently overrides the fleet ([`WatchStatus::overridden`] lists the file's
/// rules the document replaces). Withdrawing the document ([`clear`](RuleOverlay::clear))
/// gives the file back every rule.
///
/// ```
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("rules.toml");
/// # std::fs::write(&path, "[[rule]]\nid = \"reads\"\nalgorithm = \"fixed_window\"\nlimit = 50\nwindow = \"1s\"\nkey = \"peer_ip\"\n")?;
/// use tollgate_core::MemoryStore;
/// use tollgate_tower::RateLimitLayer;
/// use tollgate_config::{Extractors, RuleWatcher};
///
/// let layer = RateLimitLayer::new(MemoryStore::new());
/// let watcher = RuleWatcher::start(&path, Extractors::new(), &layer)?;
/// let overlay = watcher.overlay();
/// overlay.apply("7", "[[rule]]\nid = \"reads\"\nalgorithm = \"fixed_window\"\nlimit = 20\nwindow = \"1s\"\nkey = \"peer_ip\"\n")?;
/// assert_eq!(watcher.status().overridden, ["reads"]);
/// overlay.clear();
/// assert!(watcher.status().overridden.is_empty());
/// # Ok(()) }
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(run()).unwrap();
/// ```
#[derive(Clone)]
pub struct RuleOverlay {
    pub(super) sources: std::sync::Arc<Sources>,
}

impl RuleOverlay {
    /// Checks `text` (a rule file, named `fleet document <version>` in messages) and puts it
    /// over the local file; its mistakes when refused (the rules in force stay, and the
    /// mistakes are kept as [`WatchStatus::overlay_error`]).
    pub fn apply(&self, version: &str, text: &str) -> Result<(), ConfigErrors> {
        self.sources.set_overlay(version, text, true)
    }

    /// As [`apply`](Self::apply), for a change someone asked for and is answered with its
    /// mistakes (an admin API's): a refused document is only returned — not kept as
    /// [`WatchStatus::overlay_error`], not logged, not counted as a failed load — and it is
    /// checked against the local file under the same lock it is installed with, so a reload
    /// cannot slip in between.
    pub fn apply_requested(&self, version: &str, text: &str) -> Result<(), ConfigErrors> {
        self.sources.set_overlay(version, text, false)
    }

    /// Checks `text` as [`apply`](Self::apply) would — alone, against this layer, and merged
    /// over the local file — without applying it: what a publisher runs before writing.
    pub fn check(&self, text: &str) -> Result<(), ConfigErrors> {
        let file = self.sources.read_overlay("fleet document", text)?;
        Sources::conflicts(&self.sources.lock(), &file)
    }

    /// Withdraws the fleet document: the local file decides every rule again.
    pub fn clear(&self) {
        self.sources.clear_overlay();
    }

    /// The version of the fleet document in force.
    pub fn version(&self) -> Option<String> {
        self.sources.lock().status.overlay_version.clone()
    }

    /// Where the watched file and the document over it stand (as
    /// [`RuleWatcher::status`](super::RuleWatcher::status)).
    pub fn status(&self) -> WatchStatus {
        self.sources.lock().status.clone()
    }

    /// The rules in force — the file with the document over it — as one TOML file (as
    /// [`RuleWatcher::to_toml`](super::RuleWatcher::to_toml)).
    pub fn to_toml(&self) -> String {
        self.sources.to_toml()
    }

    /// The fleet document in force, if any (what a change of one rule builds on).
    pub fn document(&self) -> Option<RuleFile> {
        self.sources.lock().overlay.clone()
    }

    /// The rule file in force under the document (`None` before it is first loaded).
    pub fn local(&self) -> Option<RuleFile> {
        self.sources.lock().local.clone()
    }

    /// The registered extractors, to check a document before publishing it.
    pub fn extractors(&self) -> &Extractors {
        &self.sources.extractors
    }
}

impl std::fmt::Debug for RuleOverlay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuleOverlay")
            .field("version", &self.version())
            .finish()
    }
}
