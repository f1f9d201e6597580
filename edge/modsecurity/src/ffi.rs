//! libmodsecurity's C API, as much of it as fairlead calls, and the safe wrappers around the
//! three objects it hands out: the engine (`ModSecurity`), a compiled rule set (`RulesSet`)
//! and a transaction, which lives only inside [`Rules::inspect`](crate::Rules::inspect).
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::ptr::NonNull;

#[repr(C)]
struct ModSecurity {
    _private: [u8; 0],
}

#[repr(C)]
struct RulesSet {
    _private: [u8; 0],
}

#[repr(C)]
struct Transaction {
    _private: [u8; 0],
}

#[repr(C)]
struct Intervention {
    status: c_int,
    pause: c_int,
    url: *mut c_char,
    log: *mut c_char,
    disruptive: c_int,
}

type LogCallback = extern "C" fn(*mut c_void, *const c_void);

#[link(name = "modsecurity")]
unsafe extern "C" {
    fn msc_init() -> *mut ModSecurity;
    fn msc_who_am_i(msc: *mut ModSecurity) -> *const c_char;
    fn msc_set_connector_info(msc: *mut ModSecurity, connector: *const c_char);
    fn msc_set_log_cb(msc: *mut ModSecurity, cb: LogCallback);
    fn msc_cleanup(msc: *mut ModSecurity);
    fn msc_create_rules_set() -> *mut RulesSet;
    fn msc_rules_add(
        rules: *mut RulesSet,
        plain: *const c_char,
        error: *mut *const c_char,
    ) -> c_int;
    fn msc_rules_cleanup(rules: *mut RulesSet) -> c_int;
    fn msc_new_transaction(
        msc: *mut ModSecurity,
        rules: *mut RulesSet,
        log_data: *mut c_void,
    ) -> *mut Transaction;
    fn msc_process_connection(
        tx: *mut Transaction,
        client: *const c_char,
        client_port: c_int,
        server: *const c_char,
        server_port: c_int,
    ) -> c_int;
    fn msc_process_uri(
        tx: *mut Transaction,
        uri: *const c_char,
        method: *const c_char,
        http_version: *const c_char,
    ) -> c_int;
    fn msc_add_n_request_header(
        tx: *mut Transaction,
        key: *const u8,
        key_len: usize,
        value: *const u8,
        value_len: usize,
    ) -> c_int;
    fn msc_process_request_headers(tx: *mut Transaction) -> c_int;
    fn msc_append_request_body(tx: *mut Transaction, body: *const u8, size: usize) -> c_int;
    fn msc_process_request_body(tx: *mut Transaction) -> c_int;
    fn msc_intervention(tx: *mut Transaction, it: *mut Intervention) -> c_int;
    fn msc_process_logging(tx: *mut Transaction) -> c_int;
    fn msc_transaction_cleanup(tx: *mut Transaction);
}

unsafe extern "C" {
    fn free(pointer: *mut c_void);
}

/// Takes a string libmodsecurity allocated with `malloc`, freeing it.
///
/// # Safety
/// `text` is null or a NUL-terminated string from `malloc` that nothing else frees.
unsafe fn take(text: *const c_char) -> Option<String> {
    if text.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated, by the caller.
    let owned = unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: allocated by libmodsecurity with malloc and not freed elsewhere.
    unsafe { free(text.cast_mut().cast()) };
    Some(owned)
}

/// What the log callback appends to: the transaction's rule messages.
type Lines = Vec<String>;

/// Called by libmodsecurity, on the thread running the transaction, for each rule message;
/// `data` is the transaction's [`Lines`].
extern "C" fn collect(data: *mut c_void, message: *const c_void) {
    if data.is_null() || message.is_null() {
        return;
    }
    // SAFETY: without RuleMessageLogProperty the message is a NUL-terminated string.
    let text = unsafe { CStr::from_ptr(message.cast::<c_char>()) }.to_string_lossy();
    // Never unwind into C.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `data` is the `Lines` that `inspect` passed to `msc_new_transaction`, alive
        // and borrowed by nothing else while the transaction runs on this thread.
        let lines = unsafe { &mut *data.cast::<Lines>() };
        lines.push(text.into_owned());
    }));
}

/// The engine: one per process.
pub(crate) struct Engine(NonNull<ModSecurity>);

// SAFETY: libmodsecurity's engine object is read-only once set up, and transactions of many
// threads share it (as every multi-threaded connector does).
unsafe impl Send for Engine {}
// SAFETY: as above.
unsafe impl Sync for Engine {}

/// libmodsecurity's process-wide state: an engine's start and end set up and tear down
/// globals of the libraries under it (libxml2's parser among them), so they run alone
/// (write), never beside a compilation or a transaction (read) of another engine in the
/// process. Tests start and drop engines on many threads at once; without this, one's
/// cleanup corrupted another's heap now and then.
static PROCESS: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Shared use of the process-wide state ([`PROCESS`]).
fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    PROCESS
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Sole use of the process-wide state ([`PROCESS`]).
fn sole() -> std::sync::RwLockWriteGuard<'static, ()> {
    PROCESS
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Engine {
    pub(crate) fn new(connector: &str) -> Option<Self> {
        let _alone = sole();
        // SAFETY: no preconditions.
        let ms = NonNull::new(unsafe { msc_init() })?;
        let connector = CString::new(connector).unwrap_or_default();
        // SAFETY: `ms` is live; the connector string is copied.
        unsafe {
            msc_set_connector_info(ms.as_ptr(), connector.as_ptr());
            msc_set_log_cb(ms.as_ptr(), collect);
        }
        Some(Self(ms))
    }

    pub(crate) fn version(&self) -> String {
        // SAFETY: live engine; the string is the engine's own, copied here.
        let text = unsafe { msc_who_am_i(self.0.as_ptr()) };
        if text.is_null() {
            return String::new();
        }
        // SAFETY: non-null and NUL-terminated.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _alone = sole();
        // SAFETY: every rule set holds an `Arc` of the engine, so none is left.
        unsafe { msc_cleanup(self.0.as_ptr()) }
    }
}

/// Held while rules compile: libmodsecurity's SecLang parser (a flex scanner) keeps global
/// state, so two compilations at once corrupt each other.
static COMPILING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A compiled rule set.
pub(crate) struct Set(NonNull<RulesSet>);

// SAFETY: a rule set is read-only once compiled; transactions of many threads evaluate it.
unsafe impl Send for Set {}
// SAFETY: as above.
unsafe impl Sync for Set {}

impl Set {
    /// Compiles `directives`; the parser's message when they do not compile.
    pub(crate) fn compile(directives: &str) -> Result<Self, String> {
        let text = CString::new(directives)
            .map_err(|_| "the directives contain a NUL character".to_owned())?;
        let _state = shared();
        let _one_at_a_time = COMPILING.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: no preconditions.
        let set = NonNull::new(unsafe { msc_create_rules_set() })
            .ok_or_else(|| "libmodsecurity could not make a rule set".to_owned())?;
        let mut error: *const c_char = std::ptr::null();
        // SAFETY: live set, NUL-terminated text, `error` written on failure (malloc'd).
        let added = unsafe { msc_rules_add(set.as_ptr(), text.as_ptr(), &mut error) };
        // SAFETY: null, or a malloc'd message nothing else frees.
        let message = unsafe { take(error) };
        if added < 0 {
            // SAFETY: the set is ours and used by nothing else.
            unsafe { msc_rules_cleanup(set.as_ptr()) };
            return Err(message
                .unwrap_or_else(|| "the rules do not compile".to_owned())
                .trim()
                .to_owned());
        }
        Ok(Self(set))
    }

    /// Runs one request through the set: its status when a rule interrupts it, and the rule
    /// messages logged meanwhile.
    pub(crate) fn run(
        &self,
        engine: &Engine,
        request: &crate::Request<'_>,
    ) -> (Option<u16>, Lines) {
        let _state = shared();
        let mut lines: Lines = Vec::new();
        let data: *mut Lines = &mut lines;
        // SAFETY: live engine and set; `data` outlives the transaction, freed below.
        let tx = unsafe { msc_new_transaction(engine.0.as_ptr(), self.0.as_ptr(), data.cast()) };
        let Some(tx) = NonNull::new(tx) else {
            return (
                Some(500),
                vec!["libmodsecurity could not start a transaction".into()],
            );
        };
        let tx = tx.as_ptr();
        // The disruptive rule's message comes with the intervention, apart from `lines`
        // (which the callback writes through `data`).
        let mut interventions = Lines::new();
        let status = Transaction::steps(tx, request, &mut interventions);
        // SAFETY: the transaction is ours; nothing uses it after.
        unsafe {
            msc_process_logging(tx);
            msc_transaction_cleanup(tx);
        }
        lines.extend(interventions);
        (status, lines)
    }
}

impl Drop for Set {
    fn drop(&mut self) {
        let _state = shared();
        // SAFETY: the last `Arc` of the rules is gone, so no transaction runs on it.
        unsafe { msc_rules_cleanup(self.0.as_ptr()) };
    }
}

impl Transaction {
    /// The phases of a request, stopping at the first interruption.
    fn steps(tx: *mut Transaction, request: &crate::Request<'_>, lines: &mut Lines) -> Option<u16> {
        let text = |s: &str| CString::new(s.replace('\0', "")).unwrap_or_default();
        let (client, server) = (
            text(&request.client.to_string()),
            text(&request.server.to_string()),
        );
        let (uri, method, version) = (
            text(request.uri),
            text(request.method),
            text(request.http_version),
        );
        // SAFETY: live transaction; every string is NUL-terminated and copied by the engine;
        // header and body slices are read within the call.
        unsafe {
            msc_process_connection(
                tx,
                client.as_ptr(),
                c_int::from(request.client_port),
                server.as_ptr(),
                c_int::from(request.server_port),
            );
            msc_process_uri(tx, uri.as_ptr(), method.as_ptr(), version.as_ptr());
            if let Some(status) = Self::interrupted(tx, lines) {
                return Some(status);
            }
            for (name, value) in request.headers {
                msc_add_n_request_header(
                    tx,
                    name.as_ptr(),
                    name.len(),
                    value.as_ptr(),
                    value.len(),
                );
            }
            msc_process_request_headers(tx);
            if let Some(status) = Self::interrupted(tx, lines) {
                return Some(status);
            }
            if !request.body.is_empty() {
                msc_append_request_body(tx, request.body.as_ptr(), request.body.len());
            }
            msc_process_request_body(tx);
            Self::interrupted(tx, lines)
        }
    }

    /// The status of a disruptive action taken so far; its rule's message (which the engine
    /// gives with the intervention, not to the log callback) joins `lines`.
    ///
    /// # Safety
    /// `tx` is a live transaction, whose log callback is not running.
    unsafe fn interrupted(tx: *mut Transaction, lines: &mut Lines) -> Option<u16> {
        let mut it = Intervention {
            status: 200,
            pause: 0,
            url: std::ptr::null_mut(),
            log: std::ptr::null_mut(),
            disruptive: 0,
        };
        // SAFETY: live transaction; `it` is ours; the strings it gets are malloc'd.
        let disruptive = unsafe { msc_intervention(tx, &mut it) } != 0;
        // SAFETY: null or malloc'd, freed once here.
        unsafe {
            take(it.url);
            lines.extend(take(it.log));
        }
        (disruptive && it.disruptive != 0).then(|| u16::try_from(it.status).unwrap_or(403))
    }
}
