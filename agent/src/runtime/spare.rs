//! One instance made ahead of its next call while nothing runs, so that
//! call skips instantiating; fresh, with no grants, until a call arms it.

use super::*;

/// An instance of a plugin made ahead of its next call, while nothing ran
/// (see [`Runtime::prepare`]), so that call skips instantiating. It was
/// made with no grants and an empty WASI context, and nothing of it has run
/// but the component's own start-up; the call puts its own context, grants
/// and deadline in before running it. Fresh, like any call's instance: no
/// job has touched it.
pub(super) struct Spare {
    pub(super) plugin: Arc<LoadedPlugin>,
    // Declared before the slot, so dropped before it.
    pub(super) store: Store<HostState>,
    pub(super) instance: PluginBindings,
    pub(super) slot: tokio::sync::OwnedSemaphorePermit,
}

impl Runtime {
    pub(super) fn spare(&self) -> std::sync::MutexGuard<'_, Option<Spare>> {
        self.spare.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn drop_spare(&self) {
        // Taken out first: the store is dropped outside the lock.
        let spare = self.spare().take();
        drop(spare);
    }

    /// The spare instance, when it is one of `plugin`.
    pub(super) fn take_spare(&self, plugin: &Arc<LoadedPlugin>) -> Option<Spare> {
        let mut spare = self.spare();
        match spare.as_ref() {
            Some(s) if Arc::ptr_eq(&s.plugin, plugin) => spare.take(),
            _ => None,
        }
    }

    /// Which module's instance is waiting, made ahead, if any.
    pub fn spare_module(&self) -> Option<String> {
        self.spare()
            .as_ref()
            .map(|s| s.plugin.manifest.module.clone())
    }

    /// Make an instance of `module`'s plugin ahead of its next call, so that
    /// call does not wait for it. Done only when no instance is live (an
    /// agent between jobs): it holds a pool slot and the pages it touched
    /// until that call, and replaces the spare of another plugin. A plugin
    /// that cannot be instantiated is left to its call to report.
    pub async fn prepare(&self, module: &str) {
        let Some(plugin) = self.plugin(module) else {
            return;
        };
        let made_already = self
            .spare()
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(&s.plugin, &plugin));
        if made_already || self.live_instances() > 0 {
            return;
        }
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            return;
        };
        // Boxed: instantiating is a large future, and every job's task
        // holds this one, which under load returns above.
        Box::pin(self.make_spare(module, plugin, slot)).await;
    }

    /// Instantiate `plugin` in `slot` and keep it as the spare.
    async fn make_spare(
        &self,
        module: &str,
        plugin: Arc<LoadedPlugin>,
        slot: tokio::sync::OwnedSemaphorePermit,
    ) {
        let limit = Duration::from_secs_f64(plugin.limits.timeout_secs);
        let deadline = Instant::now() + limit;
        let job = self.job_state(
            module,
            "spare",
            Arc::new(Grants::none()),
            &plugin.limits,
            deadline,
        );
        let mut store = self.store(WasiCtxBuilder::new().build(), job);
        let made = tokio::time::timeout(limit + EPOCH_TICK * 4, async {
            self.pre(&plugin).await?.instantiate_async(&mut store).await
        })
        .await;
        match made {
            Ok(Ok(instance)) => {
                // Nothing runs in it until its call, which ticks again.
                store.data_mut().ticking = None;
                let old = self.spare().replace(Spare {
                    plugin,
                    store,
                    instance,
                    slot,
                });
                drop(old);
            }
            Ok(Err(e)) => tracing::debug!(plugin = module, cause = %e, "no instance made ahead"),
            Err(_) => tracing::debug!(plugin = module, "no instance made ahead: timed out"),
        }
    }
}
