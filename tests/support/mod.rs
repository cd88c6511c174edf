//! What the root package's integration tests share: a child process that cannot outlive a
//! failed assertion.

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
