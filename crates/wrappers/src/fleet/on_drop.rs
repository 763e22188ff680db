//! A guard that runs its closure when dropped, unless disarmed: what marks a store call landed,
//! or a background job done, however its future ends (finished, dropped mid-way, or dropped
//! before it ever ran).

/// Runs its closure when dropped, unless disarmed.
pub(super) struct OnDrop<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> OnDrop<F> {
    pub(super) fn new(run: F) -> Self {
        OnDrop(Some(run))
    }

    pub(super) fn disarm(mut self) {
        self.0 = None;
    }
}

impl<F: FnOnce()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(run) = self.0.take() {
            run();
        }
    }
}
