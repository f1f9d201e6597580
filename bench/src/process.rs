//! What the benchmarks read of a process from `/proc`.

use std::time::Duration;

/// A process's CPU time so far (user and system), from `/proc/<pid>/stat`.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command's `(…)`: state is the first, utime the 12th, stime the 13th.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // Linux reports in USER_HZ, 100 a second on every architecture it runs on here.
    Some(Duration::from_millis(ticks * 10))
}

#[cfg(test)]
mod tests {
    use super::cpu_time;
    use std::time::{Duration, Instant};

    #[test]
    fn a_process_cpu_time_is_read() {
        let pid = std::process::id();
        let before = cpu_time(pid).unwrap();
        let spin = Instant::now();
        let mut x = 0u64;
        while spin.elapsed() < Duration::from_millis(200) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let after = cpu_time(pid).unwrap();
        assert!(after > before, "{before:?} then {after:?}");
    }
}
