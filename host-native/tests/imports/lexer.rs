//! Rust source as the few tokens the import check needs: identifiers, `::` and single
//! punctuation, each with its line. Comments (doc comments too), string, byte, C-string and
//! character literals, numbers and lifetimes produce no identifier, so a path written in a
//! comment or a string (`"crate::x"`) is never read as an import.

/// One token of code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or keyword (`r#type` reads `type`).
    Ident(String),
    /// `::`.
    PathSep,
    /// Any other character that is not whitespace; literals and numbers read as `'0'`.
    Punct(char),
}

/// A token and the 1-based line it starts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub tok: Tok,
    pub line: usize,
}

/// The tokens of `source`.
pub fn tokens(source: &str) -> Vec<Token> {
    let mut lexer = Lexer {
        chars: source.chars().collect(),
        at: 0,
        line: 1,
        out: Vec::new(),
    };
    lexer.run();
    lexer.out
}

struct Lexer {
    chars: Vec<char>,
    at: usize,
    line: usize,
    out: Vec<Token>,
}

fn ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

impl Lexer {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    /// Moves past one character, counting lines.
    fn bump(&mut self) {
        if self.peek(0) == Some('\n') {
            self.line += 1;
        }
        self.at += 1;
    }

    fn push(&mut self, tok: Tok, line: usize) {
        self.out.push(Token { tok, line });
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            let line = self.line;
            match c {
                c if c.is_whitespace() => self.bump(),
                '/' if self.peek(1) == Some('/') => self.line_comment(),
                '/' if self.peek(1) == Some('*') => self.block_comment(),
                '"' => {
                    self.bump();
                    self.quoted('"');
                    self.push(Tok::Punct('0'), line);
                }
                '\'' => self.quote_or_lifetime(line),
                ':' if self.peek(1) == Some(':') => {
                    self.at += 2;
                    self.push(Tok::PathSep, line);
                }
                c if c.is_ascii_digit() => self.number(line),
                c if ident_start(c) => self.word(line),
                c => {
                    self.bump();
                    self.push(Tok::Punct(c), line);
                }
            }
        }
    }

    fn line_comment(&mut self) {
        while self.peek(0).is_some_and(|c| c != '\n') {
            self.bump();
        }
    }

    /// A block comment, nested ones included.
    fn block_comment(&mut self) {
        let mut depth = 0usize;
        while let Some(c) = self.peek(0) {
            if c == '/' && self.peek(1) == Some('*') {
                depth += 1;
                self.at += 2;
            } else if c == '*' && self.peek(1) == Some('/') {
                depth -= 1;
                self.at += 2;
                if depth == 0 {
                    return;
                }
            } else {
                self.bump();
            }
        }
    }

    /// The rest of a literal opened by `close` (already consumed), escapes honoured.
    fn quoted(&mut self, close: char) {
        while let Some(c) = self.peek(0) {
            self.bump();
            if c == '\\' {
                self.bump();
            } else if c == close {
                return;
            }
        }
    }

    /// A raw string after its prefix: `#`s, `"`, the body, `"` and as many `#`s.
    fn raw_string(&mut self) {
        let mut hashes = 0;
        while self.peek(0) == Some('#') {
            hashes += 1;
            self.bump();
        }
        self.bump(); // the opening quote
        while let Some(c) = self.peek(0) {
            self.bump();
            if c == '"' && (0..hashes).all(|k| self.peek(k) == Some('#')) {
                self.at += hashes;
                return;
            }
        }
    }

    /// `'x'`, `'\n'`, `'\u{1F600}'` (a character literal) or `'a` (a lifetime or label).
    fn quote_or_lifetime(&mut self, line: usize) {
        if self.peek(1) == Some('\\') || self.peek(2) == Some('\'') {
            self.bump();
            self.quoted('\'');
            self.push(Tok::Punct('0'), line);
        } else {
            self.bump();
            while self.peek(0).is_some_and(ident_char) {
                self.bump();
            }
        }
    }

    /// A number (`0x1F`, `1_000u64`, `2.5e3`): no identifier inside it.
    fn number(&mut self, line: usize) {
        while let Some(c) = self.peek(0) {
            let fraction = c == '.' && self.peek(1).is_some_and(|d| d.is_ascii_digit());
            if ident_char(c) || fraction {
                self.bump();
            } else {
                break;
            }
        }
        self.push(Tok::Punct('0'), line);
    }

    /// An identifier, or the prefix of a literal (`b"…"`, `br#"…"#`, `r"…"`, `c"…"`, `b'x'`),
    /// or a raw identifier (`r#type`).
    fn word(&mut self, line: usize) {
        let start = self.at;
        while self.peek(0).is_some_and(ident_char) {
            self.bump();
        }
        let word: String = self.chars[start..self.at].iter().collect();
        let next = self.peek(0);
        let raw_prefix = matches!(word.as_str(), "r" | "br" | "cr");
        match (word.as_str(), next) {
            ("r", Some('#')) if self.peek(1).is_some_and(ident_start) => {
                self.bump();
                self.word(line);
            }
            (_, Some('"')) | (_, Some('#')) if raw_prefix => {
                self.raw_string();
                self.push(Tok::Punct('0'), line);
            }
            ("b" | "c", Some('"')) => {
                self.bump();
                self.quoted('"');
                self.push(Tok::Punct('0'), line);
            }
            ("b", Some('\'')) => {
                self.bump();
                self.quoted('\'');
                self.push(Tok::Punct('0'), line);
            }
            _ => self.push(Tok::Ident(word), line),
        }
    }
}
