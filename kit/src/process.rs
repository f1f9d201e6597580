//! Child processes that do not outlive their parent. A process asks the kernel for a signal
//! when its parent dies ([`die_with_parent`], Linux's `PR_SET_PDEATHSIG`, kept across
//! `exec`), so a supervisor killed outright (SIGKILL, an OOM kill) takes its children with
//! it instead of leaving them holding ports. [`exec_child`] is that for a program that cannot
//! ask itself (Envoy): it asks, checks its parent is still the one that started it, and
//! becomes the program.

use std::ffi::OsString;

pub use rustix::process::Signal;

/// Why a child could not be tied to its parent, or could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The kernel refused the death signal.
    #[error("asking for a signal at the parent's death: {0}")]
    DeathSignal(std::io::Error),
    /// The parent died before the signal was set up.
    #[error("the parent process ({0}) is gone")]
    Orphaned(i32),
    /// The program could not be run.
    #[error("running {program:?}: {source}")]
    Exec {
        /// The program.
        program: OsString,
        /// The error.
        source: std::io::Error,
    },
}

/// Asks for `signal` when the parent process dies; an error when the parent (`parent`, the
/// pid that started this process) is already gone.
pub fn die_with_parent(signal: Signal, parent: i32) -> Result<(), ProcessError> {
    rustix::process::set_parent_process_death_signal(Some(signal))
        .map_err(|e| ProcessError::DeathSignal(e.into()))?;
    match rustix::process::getppid() {
        Some(pid) if pid.as_raw_nonzero().get() == parent => Ok(()),
        _ => Err(ProcessError::Orphaned(parent)),
    }
}

/// Becomes `program` with `args`, killed when `parent` dies. Returns only on failure.
pub fn exec_child(parent: i32, program: OsString, args: Vec<OsString>) -> ProcessError {
    use std::os::unix::process::CommandExt as _;
    if let Err(e) = die_with_parent(Signal::KILL, parent) {
        return e;
    }
    let source = std::process::Command::new(&program).args(args).exec();
    ProcessError::Exec { program, source }
}

/// The pid of this process (what a child names as its parent).
pub fn pid() -> i32 {
    rustix::process::getpid().as_raw_nonzero().get()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_that_names_another_parent_refuses_to_run() {
        assert!(matches!(
            die_with_parent(Signal::TERM, pid()),
            Err(ProcessError::Orphaned(_))
        ));
        let parent = rustix::process::getppid().unwrap().as_raw_nonzero().get();
        assert!(die_with_parent(Signal::TERM, parent).is_ok());
        rustix::process::set_parent_process_death_signal(None).unwrap();
    }
}
