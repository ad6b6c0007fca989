//! One call: a pool slot and a store (or the spare instance), the job's
//! context and grants armed, the wall-clock limit, the guest's function,
//! and its outcome — a return, a trap or a timeout classified as Salt's
//! retcodes — then the instance's teardown.

use super::*;

/// Classify a call that ended in a wasmtime error (trap, limit, interrupt).
pub(super) fn classify_trap(
    err: &wasmtime::Error,
    state: &HostState,
    stderr: &str,
    timeout: Duration,
) -> Outcome {
    if state.limiter.memory_exceeded {
        return Outcome::fail(
            Failure::PluginError,
            retcode::ERROR,
            format!(
                "Plugin error: memory limit of {} MiB exceeded",
                state.limiter.memory_bytes >> 20
            ),
        );
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => return timed_out(timeout),
        Some(Trap::StackOverflow) => {
            return Outcome::fail(
                Failure::PluginError,
                retcode::ERROR,
                "Plugin error: call stack exhausted (stack overflow)".into(),
            );
        }
        _ => {}
    }
    let message = match panic_message(stderr) {
        Some(panic) => format!("Plugin error: {panic}"),
        None => format!("Plugin error: {err}"),
    };
    Outcome::fail(Failure::PluginError, retcode::ERROR, message)
}

/// A Rust guest prints `thread '..' panicked at FILE:LINE:COL:` and the
/// message to stderr before it traps; that message is what the operator
/// needs, as a Python traceback's last line is in Salt.
pub(super) fn panic_message(stderr: &str) -> Option<String> {
    let mut lines = stderr.lines().skip_while(|l| !l.contains(" panicked at "));
    let head = lines.next()?;
    let location = head
        .split(" panicked at ")
        .nth(1)
        .unwrap_or_default()
        .trim_end_matches(':');
    let message: Vec<&str> = lines
        .take_while(|l| !l.starts_with("note: run with `RUST_BACKTRACE"))
        .collect();
    Some(format!(
        "{} (panicked at {location})",
        message.join("\n").trim()
    ))
}

pub(super) fn timed_out(limit: Duration) -> Outcome {
    Outcome::fail(
        Failure::TimedOut,
        retcode::TIMED_OUT,
        format!("Timed out after {} seconds", limit.as_secs_f64()),
    )
}

/// Check the clock every epoch tick: past `deadline` the guest traps,
/// before it the guest yields so other tasks keep running.
pub(super) fn stop_at(store: &mut Store<HostState>, deadline: Instant) {
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if Instant::now() >= deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
}

impl Runtime {
    pub(super) fn store(&self, wasi: wasmtime_wasi::WasiCtx, job: JobState) -> Store<HostState> {
        let limits = &job.limits;
        let limiter = Limiter {
            memory_bytes: usize::try_from(limits.memory_mb << 20).unwrap_or(usize::MAX),
            max_instances: limits.max_instances,
            max_tables: limits.max_tables,
            max_table_elements: limits.max_table_elements,
            memory_exceeded: false,
        };
        let deadline = job.deadline;
        let mut store = Store::new(
            &self.engine,
            HostState {
                ticking: Some(self.ticker.ticking()),
                wasi,
                table: ResourceTable::new(),
                limiter,
                job,
            },
        );
        store.limiter(|s| &mut s.limiter);
        stop_at(&mut store, deadline);
        store
    }

    /// Give a spare's store to a call: its WASI context, its job (grants,
    /// deadline) and the ticking of the epoch.
    pub(super) fn arm(
        &self,
        store: &mut Store<HostState>,
        wasi: wasmtime_wasi::WasiCtx,
        job: JobState,
    ) {
        let deadline = job.deadline;
        let state = store.data_mut();
        state.wasi = wasi;
        state.job = job;
        state.ticking = Some(self.ticker.ticking());
        stop_at(store, deadline);
    }

    /// The state of a store for `module`'s call `jid`.
    pub(super) fn job_state(
        &self,
        module: &str,
        jid: &str,
        grants: Arc<Grants>,
        limits: &Limits,
        deadline: Instant,
    ) -> JobState {
        JobState {
            plugin: Arc::from(module),
            jid: Arc::from(jid),
            grants,
            services: self.settings.services.clone(),
            catalog: self.plugins.clone(),
            limits: limits.clone(),
            deadline,
            retcode: None,
            log_budget: limits.max_log_bytes,
            log_dropped: 0,
            used: Vec::new(),
            fs_paths: Default::default(),
            files: Default::default(),
            source_hashes: Arc::default(),
            pillar: None,
            runtime: self.me.clone(),
            depth: 0,
            minion_id: Arc::from(""),
            user: None,
            fs_on_call_thread: self.settings.fs_on_call_thread,
        }
    }

    /// A pool slot. When none is free the spare instance gives its up: a
    /// call that runs comes before one that might.
    pub(super) async fn pool_slot(
        &self,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, tokio::sync::AcquireError> {
        if let Ok(slot) = self.slots.clone().try_acquire_owned() {
            return Ok(slot);
        }
        self.drop_spare();
        self.slots.clone().acquire_owned().await
    }

    /// Run one call. Never fails: every way a call can go wrong is an
    /// [`Outcome`] with Salt's return for it.
    pub async fn call(&self, req: CallRequest) -> Outcome {
        self.call_torn_down(req, 0).await
    }

    /// A call `depth` deep, its instance torn down before it returns; the
    /// duration includes the teardown.
    async fn call_torn_down(&self, req: CallRequest, depth: u8) -> Outcome {
        let started = Instant::now();
        let (mut outcome, teardown) = self.call_at(req, depth).await;
        drop(teardown);
        outcome.duration = started.elapsed();
        outcome
    }

    /// [`Runtime::call`], with the instance's teardown left to the caller
    /// when no other instance is live: the outcome is known before the
    /// store is dropped, so a caller can send it on first and drop the
    /// [`Teardown`] while it travels. The duration is the call's without
    /// the teardown.
    ///
    /// With other instances live the teardown is done here, before
    /// returning: calls queued behind this one would otherwise each take
    /// another pool slot while this one waits, and slots past the warm ones
    /// the pool keeps start cold.
    pub async fn call_deferred(&self, req: CallRequest) -> (Outcome, Teardown) {
        let started = Instant::now();
        let (mut outcome, mut teardown) = self.call_inner(req).await;
        outcome.duration = started.elapsed();
        if self.live_instances() > 1 {
            teardown = Teardown::default();
        }
        (outcome, teardown)
    }

    /// Tear down what [`Runtime::call_deferred`] handed back. When it held
    /// the instance (the call ran alone), the next instance of its plugin
    /// is then made ahead ([`Runtime::prepare`]).
    pub async fn retire(&self, teardown: Teardown) {
        let module = teardown.store.as_ref().map(|s| s.data().job.plugin.clone());
        drop(teardown);
        if let Some(module) = module {
            self.prepare(&module).await;
        }
    }

    /// Pool slots in use now by calls and `describe`s (not the spare).
    pub(super) fn live_instances(&self) -> usize {
        let total = self.settings.pool_slots() as usize;
        let spare = usize::from(self.spare().is_some());
        total.saturating_sub(self.slots.available_permits() + spare)
    }

    pub(super) async fn call_inner(&self, req: CallRequest) -> (Outcome, Teardown) {
        self.call_at(req, 0).await
    }

    /// A call a plugin makes with `call`, from a call `depth - 1` deep: run
    /// and torn down here, its future boxed (it runs inside its caller's).
    pub(super) fn nested(
        &self,
        req: CallRequest,
        depth: u8,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send + '_>> {
        Box::pin(self.call_torn_down(req, depth))
    }

    /// A call `depth` deep: 0 for a job's, 1 for one a job's plugin made.
    async fn call_at(&self, req: CallRequest, depth: u8) -> (Outcome, Teardown) {
        let not_available = |why| (not_available(&req.fun, why), Teardown::default());
        let Some((module, function)) = req.fun.split_once('.') else {
            return not_available(None);
        };
        let Some(plugin) = self.plugin(module) else {
            return not_available(self.load_failure(module));
        };
        let known = match req.private {
            true => plugin.manifest.private_function(function),
            false => plugin.manifest.function(function),
        };
        if known.is_none() {
            return not_available(None);
        }

        let mut limit = Duration::from_secs_f64(plugin.limits.timeout_secs);
        if let Some(t) = req.timeout {
            limit = limit.min(t);
        }
        let stderr = Capture::new(CAPTURE_BYTES);
        let mut wasi = wasi_for(&plugin, module, &stderr, self.settings.fs_on_call_thread);
        let deadline = Instant::now() + limit;
        let held = match nested_slot(&plugin, module, depth) {
            Ok(held) => held,
            Err(outcome) => return (*outcome, Teardown::default()),
        };
        // Waiting for a free instance counts against the call's own limit.
        let slots = async {
            let of_plugin = match held {
                Some(slot) => slot,
                None => plugin.slots.clone().acquire_owned().await?,
            };
            let (of_pool, spare) = match self.take_spare(&plugin) {
                Some(s) => (s.slot, Some((s.store, s.instance))),
                None => (self.pool_slot().await?, None),
            };
            Ok::<_, tokio::sync::AcquireError>(([of_plugin, of_pool], spare))
        };
        let Ok(Ok((slots, spare))) = tokio::time::timeout(limit, slots).await else {
            return (timed_out(limit), Teardown::default());
        };
        let job = self.call_state(&plugin, module, &req, deadline, depth);
        let (mut store, made) = match spare {
            Some((mut store, instance)) => {
                self.arm(&mut store, wasi.build(), job);
                (store, Some(instance))
            }
            None => (self.store(wasi.build(), job), None),
        };

        let args = Value::Array(req.args.clone()).to_string();
        let kwargs = Value::Object(req.kwargs.clone()).to_string();
        let ctx = bindings::maid::plugin::types::Context {
            jid: req.jid.clone(),
            minion_id: req.minion_id.clone(),
            user: req.user.clone(),
        };
        let run = async {
            let instance = match made {
                Some(instance) => instance,
                None => {
                    self.pre(&plugin)
                        .await?
                        .instantiate_async(&mut store)
                        .await?
                }
            };
            instance
                .call_call(&mut store, function, &args, &kwargs, &ctx)
                .await
        };
        // The epoch callback stops a guest that computes past the deadline;
        // this stops one that waits past it in a host call (sleep, exec).
        let left = deadline.saturating_duration_since(Instant::now());
        let result = tokio::time::timeout(left + EPOCH_TICK * 4, run).await;
        let mut outcome = match result {
            Err(_) => timed_out(limit),
            Ok(Err(err)) => classify_trap(&err, store.data(), &stderr.text(), limit),
            Ok(Ok(Err(e))) => guest_error(e),
            Ok(Ok(Ok(json))) => self.decode_return(&plugin, json, store.data().job.retcode),
        };
        let job = &mut store.data_mut().job;
        if job.log_dropped > 0 {
            tracing::warn!(plugin = module, jid = %req.jid, dropped = job.log_dropped, "log lines over the limit were dropped");
        }
        outcome.used = std::mem::take(&mut job.used);
        outcome.plugin_sha256 = Some(plugin.sha256.clone());
        (
            outcome,
            Teardown {
                store: Some(store),
                _slots: Some(slots),
            },
        )
    }

    /// What the host knows of one call of `plugin` while it runs: the
    /// job, its grants and limits, its deadline, its pinned `salt://`
    /// sources and how deep it is nested.
    fn call_state(
        &self,
        plugin: &LoadedPlugin,
        module: &str,
        req: &CallRequest,
        deadline: Instant,
        depth: u8,
    ) -> JobState {
        let mut job = self.job_state(
            module,
            &req.jid,
            plugin.grants.clone(),
            &plugin.limits,
            deadline,
        );
        job.source_hashes = Arc::new(req.source_hashes.clone());
        job.pillar = req.pillar.clone();
        job.depth = depth;
        job.minion_id = Arc::from(req.minion_id.as_str());
        job.user = req.user.clone();
        job
    }

    pub(super) fn decode_return(
        &self,
        plugin: &LoadedPlugin,
        json: String,
        retcode: Option<i32>,
    ) -> Outcome {
        let max = plugin.limits.max_return_bytes;
        if json.len() > max {
            return Outcome::fail(
                Failure::PluginError,
                retcode::ERROR,
                format!(
                    "Plugin error: return of {} bytes exceeds the limit of {max} bytes",
                    json.len()
                ),
            );
        }
        match serde_json::from_str::<Value>(&json) {
            Ok(ret) => {
                let retcode = retcode.unwrap_or(0);
                Outcome {
                    ret,
                    retcode,
                    failure: (retcode != 0).then_some(Failure::Function),
                    duration: Duration::ZERO,
                    used: Vec::new(),
                    plugin_sha256: None,
                    returned: true,
                }
            }
            Err(e) => Outcome::fail(
                Failure::PluginError,
                retcode::ERROR,
                format!("Plugin error: return is not JSON: {e}"),
            ),
        }
    }
}

/// `fun` cannot be called: no such module or function, or (`why`) its
/// module did not load.
fn not_available(fun: &str, why: Option<String>) -> Outcome {
    let mut message = format!("'{fun}' is not available.");
    if let Some(why) = why {
        message.push_str(" The module did not load: ");
        message.push_str(&why);
    }
    Outcome::fail(Failure::NotAvailable, retcode::NOT_AVAILABLE, message)
}

/// The WASI context of one call of `plugin`: its output into `stderr`,
/// and the directories its grants preopen, each read-only unless granted
/// writable; file system calls on the calling thread where the runtime
/// says so.
fn wasi_for(
    plugin: &LoadedPlugin,
    module: &str,
    stderr: &Capture,
    fs_on_call_thread: bool,
) -> WasiCtxBuilder {
    let mut wasi = WasiCtxBuilder::new();
    wasi.stdout(stderr.clone()).stderr(stderr.clone());
    wasi.allow_blocking_current_thread(fs_on_call_thread);
    for dir in plugin.grants.preopens() {
        let perms = if dir.writable {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        let guest = dir.path.to_string_lossy().into_owned();
        if let Err(e) = wasi.preopened_dir(&dir.path, &guest, perms) {
            // A granted directory that does not exist is the operator's
            // mistake; the plugin runs without it and says what failed.
            tracing::warn!(plugin = module, dir = %dir.path.display(), cause = %e, "cannot preopen");
        }
    }
    wasi
}

/// The plugin slot of a nested call (`depth` over 0), taken now or not at
/// all: its caller may hold the one it would wait for. (It may wait for a
/// pool slot: the pool has one more than the calls a maid runs at once,
/// and a nested call cannot nest again, so one always comes free.) A call
/// at depth 0 waits for its slot later, within its time limit.
fn nested_slot(
    plugin: &LoadedPlugin,
    module: &str,
    depth: u8,
) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, Box<Outcome>> {
    if depth == 0 {
        return Ok(None);
    }
    plugin
        .slots
        .clone()
        .try_acquire_owned()
        .map(Some)
        .map_err(|_| {
            let message = format!(
                "Plugin error: {module} already runs its limit of {} calls at once",
                plugin.limits.max_concurrent
            );
            Box::new(Outcome::fail(Failure::PluginError, retcode::ERROR, message))
        })
}

/// A function's own failure, as the job sees it: bad arguments and
/// refusals with Salt's words and retcodes, a failure with its retcode
/// (never 0).
fn guest_error(e: bindings::maid::plugin::types::Error) -> Outcome {
    use bindings::maid::plugin::types::ErrorKind;
    match e.kind {
        ErrorKind::BadArguments => Outcome::fail(
            Failure::BadArguments,
            retcode::ERROR,
            format!("Passed invalid arguments: {}", e.message),
        ),
        ErrorKind::Denied => Outcome::fail(
            Failure::Denied,
            retcode::DENIED,
            format!("Denied: {}", e.message),
        ),
        ErrorKind::Failed => Outcome::fail(
            Failure::Function,
            if e.retcode == 0 {
                retcode::ERROR
            } else {
                e.retcode
            },
            e.message,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rust_panic_is_told_by_its_message_and_place() {
        let stderr = "some output\nthread '<unnamed>' panicked at src/lib.rs:10:5:\n\
                      boom: it broke\nsecond line\n\
                      note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some("boom: it broke\nsecond line (panicked at src/lib.rs:10:5)")
        );
        assert_eq!(panic_message("just output\n"), None);
    }

    #[test]
    fn a_timeout_is_salts_retcode_and_words() {
        let out = timed_out(Duration::from_millis(1500));
        assert_eq!(out.retcode, retcode::TIMED_OUT);
        assert_eq!(out.failure, Some(Failure::TimedOut));
        assert_eq!(out.ret, Value::String("Timed out after 1.5 seconds".into()));
        assert!(!out.success());
    }
}
