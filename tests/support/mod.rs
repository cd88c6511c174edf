//! What the root package's integration tests share: a child process that cannot outlive a
//! failed assertion, and a look at a process's children through /proc.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A child process stopped on drop: SIGTERM, up to 5 s to exit, then SIGKILL and reap.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// (state, parent PID) of a process, from /proc; `None` once it is gone.
#[allow(dead_code)] // not every test binary that includes this module looks at processes
pub fn proc_stat(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    Some((f.next()?.chars().next()?, f.next()?.parse().ok()?))
}

/// The live (not zombie) children of `parent`.
#[allow(dead_code)]
pub fn children_of(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| proc_stat(p).is_some_and(|(s, pp)| pp == parent && s != 'Z'))
        .collect()
}
