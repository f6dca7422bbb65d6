//! `watch` asking about a server that needs approval: one key on a terminal (raw mode through
//! crossterm, only while the question waits), a line of input when stdin is not a terminal
//! (a script, a pipe), and the hint printed instead when nobody can be asked.

use std::io::{self, BufRead};

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::terminal;
use mcp_reconcile::review::{quoted, ApprovalRequest};

/// A decision about one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Approve,
    /// This one and every later one of the session.
    ApproveAll,
    Reject,
    /// Store nothing; it stays pending.
    Skip,
}

/// How the question is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// One key, stdin being a terminal.
    Key,
    /// A line (`a`, `approve`, `y`, …), stdin being a pipe or a file.
    Line,
}

/// What a key press at the question means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyMeaning {
    Answer(Answer),
    /// Ctrl-C: the person wants `watch` to stop (raw mode turns it into a key).
    Interrupt,
    /// Any other key: keep waiting.
    Ignored,
}

/// The question line, shown below the review and again below anything printed while it
/// waits.
pub fn question(request: &ApprovalRequest) -> String {
    format!(
        "? approve {}: [a]pprove, [r]eject, approve [A]ll, [s]kip ",
        quoted(&request.name)
    )
}

/// What `watch` (when nobody can be asked) and `serve` print for a server that waits: its
/// review and the command that approves exactly that entry.
pub fn approval_hint(request: &ApprovalRequest) -> String {
    format!("{}{}", request.review(), hint_line(request))
}

/// The line of [`approval_hint`] after the review: the command that approves the entry.
pub fn hint_line(request: &ApprovalRequest) -> String {
    request.hint_line()
}

/// The meaning of `key`: `a`/`y` approve, `A` approves all, `r`/`n` reject, `s`, Esc, Enter
/// and Ctrl-D skip, Ctrl-C interrupts; releases and repeats of a key are ignored.
pub fn key_meaning(key: &KeyEvent) -> KeyMeaning {
    if key.kind != KeyEventKind::Press {
        return KeyMeaning::Ignored;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    match key.code {
        KeyCode::Char('c') if ctrl => KeyMeaning::Interrupt,
        KeyCode::Char('d') if ctrl => KeyMeaning::Answer(Answer::Skip),
        _ if ctrl => KeyMeaning::Ignored,
        KeyCode::Char('a' | 'y') => KeyMeaning::Answer(Answer::Approve),
        KeyCode::Char('A') => KeyMeaning::Answer(Answer::ApproveAll),
        KeyCode::Char('r' | 'n') => KeyMeaning::Answer(Answer::Reject),
        KeyCode::Char('s') | KeyCode::Esc | KeyCode::Enter => KeyMeaning::Answer(Answer::Skip),
        _ => KeyMeaning::Ignored,
    }
}

/// The answer a line of input gives (Skip for anything unknown).
pub fn line_answer(line: &str) -> Answer {
    match line.trim() {
        "a" | "approve" | "y" | "yes" => Answer::Approve,
        "A" | "all" => Answer::ApproveAll,
        "r" | "reject" | "n" | "no" => Answer::Reject,
        _ => Answer::Skip,
    }
}

/// Waits for the answer (on a blocking thread: a terminal read cannot be cancelled).
/// `None`: nobody can answer any more (end of input, a terminal that cannot be read) — the
/// question is skipped, and later ones are printed as hints.
pub async fn read_answer(input: Input) -> Option<Answer> {
    tokio::task::spawn_blocking(move || match input {
        Input::Key => read_key(),
        Input::Line => read_line(),
    })
    .await
    .ok()
    .flatten()
}

fn read_line() -> Option<Answer> {
    let mut line = String::new();
    match io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line_answer(&line)),
    }
}

/// One key in raw mode; the terminal is restored before this returns. Ctrl-C is passed on as
/// SIGINT, so `watch` stops as it would outside the question.
fn read_key() -> Option<Answer> {
    terminal::enable_raw_mode().ok()?;
    let meaning = loop {
        match event::read() {
            Ok(Event::Key(key)) => match key_meaning(&key) {
                KeyMeaning::Ignored => continue,
                meaning => break Some(meaning),
            },
            Ok(_) => continue,
            Err(_) => break None,
        }
    };
    restore_terminal();
    match meaning? {
        KeyMeaning::Answer(answer) => Some(answer),
        KeyMeaning::Interrupt => {
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGINT);
            Some(Answer::Skip)
        }
        KeyMeaning::Ignored => Some(Answer::Skip),
    }
}

/// Leaves raw mode if a question left the terminal in it (`watch` stopped while it waited).
pub fn restore_terminal() {
    let _ = terminal::disable_raw_mode();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode, modifiers: KeyModifiers) -> KeyMeaning {
        key_meaning(&KeyEvent::new(code, modifiers))
    }

    #[test]
    fn one_key_decides() {
        let none = KeyModifiers::NONE;
        let answer = |a| KeyMeaning::Answer(a);
        assert_eq!(press(KeyCode::Char('a'), none), answer(Answer::Approve));
        assert_eq!(press(KeyCode::Char('y'), none), answer(Answer::Approve));
        assert_eq!(
            press(KeyCode::Char('A'), KeyModifiers::SHIFT),
            answer(Answer::ApproveAll)
        );
        assert_eq!(press(KeyCode::Char('r'), none), answer(Answer::Reject));
        assert_eq!(press(KeyCode::Char('n'), none), answer(Answer::Reject));
        for skip in [KeyCode::Char('s'), KeyCode::Esc, KeyCode::Enter] {
            assert_eq!(press(skip, none), answer(Answer::Skip), "{skip:?}");
        }
        assert_eq!(
            press(KeyCode::Char('d'), KeyModifiers::CONTROL),
            answer(Answer::Skip)
        );
        assert_eq!(
            press(KeyCode::Char('c'), KeyModifiers::CONTROL),
            KeyMeaning::Interrupt
        );
    }

    #[test]
    fn other_keys_and_releases_keep_waiting() {
        let none = KeyModifiers::NONE;
        for code in [KeyCode::Char('x'), KeyCode::Up, KeyCode::Tab, KeyCode::F(1)] {
            assert_eq!(press(code, none), KeyMeaning::Ignored, "{code:?}");
        }
        assert_eq!(
            press(KeyCode::Char('a'), KeyModifiers::CONTROL),
            KeyMeaning::Ignored,
            "Ctrl-A is not an answer"
        );
        let mut release = KeyEvent::new(KeyCode::Char('a'), none);
        release.kind = KeyEventKind::Release;
        assert_eq!(key_meaning(&release), KeyMeaning::Ignored);
    }

    #[test]
    fn a_line_answers_like_its_key() {
        assert_eq!(line_answer("a\n"), Answer::Approve);
        assert_eq!(line_answer("yes\n"), Answer::Approve);
        assert_eq!(line_answer("A\n"), Answer::ApproveAll);
        assert_eq!(line_answer("reject\n"), Answer::Reject);
        assert_eq!(line_answer("\n"), Answer::Skip);
        assert_eq!(line_answer("maybe\n"), Answer::Skip);
    }
}
