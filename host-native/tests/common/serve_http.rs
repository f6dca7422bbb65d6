//! `mcp-reconcile serve --http 127.0.0.1:0` as a child process of a test.

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::{cli, Group, Project};

/// `serve --http 127.0.0.1:0` for a project, in its own process group (killed on drop).
pub struct ServeHttp {
    group: Group,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// The file with the bearer token.
    pub token_file: PathBuf,
    log: PathBuf,
}

impl ServeHttp {
    /// Starts it with the project's flags; its stderr goes to `serve.log` in the project.
    pub fn start(p: &Project) -> ServeHttp {
        let log = p.path("serve.log");
        let err = fs::File::create(&log).expect("log file");
        let mut child = Command::new(cli())
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(p.flags())
            .args(["--debounce-ms", "150"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .process_group(0)
            .spawn()
            .expect("serve starts");
        let stdout = child.stdout.take().expect("stdout");
        let group = Group::new(child);
        let mut lines = BufReader::new(stdout).lines();
        let mut next = || lines.next().and_then(Result::ok).unwrap_or_default();
        // serve prints the URL, then the path of the token file (never the token).
        let (url, token_file) = (next(), PathBuf::from(next()));
        let served = ServeHttp {
            group,
            url,
            token_file,
            log,
        };
        assert!(
            served.url.starts_with("http://127.0.0.1:") && served.token_file.is_file(),
            "serve did not print its URL and token file; log:\n{}",
            served.log()
        );
        served
    }

    /// The bearer token.
    pub fn token(&self) -> String {
        fs::read_to_string(&self.token_file)
            .expect("token file")
            .trim()
            .to_owned()
    }

    /// What serve wrote to stderr so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM and wait: serve stops every server before it exits.
    pub fn stop(&mut self) {
        self.group.signal(nix::sys::signal::Signal::SIGTERM);
        assert!(self.group.wait_exit(), "serve did not exit on SIGTERM");
    }
}
