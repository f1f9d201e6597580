//! libmodsecurity 3 for fairlead's WAF: an [`Engine`] per process, [`Rules`] compiled from
//! SecLang directives (the OWASP Core Rule Set among them), and [`Rules::inspect`], which runs
//! one request through a rule set and returns its [`Verdict`]: the status when a rule
//! interrupts the request, and the rules that matched (id and message, from the engine's rule
//! messages). Only requests are inspected; the engine never sees a response.
//!
//! The only crate of the workspace that calls C; its `unsafe` lives in one module.

mod ffi;

use std::net::IpAddr;
use std::sync::Arc;

/// Why rules cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// libmodsecurity did not start.
    #[error("libmodsecurity did not start")]
    Init,
    /// The directives do not compile: the engine's message.
    #[error("{0}")]
    Compile(String),
}

/// The engine, shared by every rule set of the process.
pub struct Engine(ffi::Engine);

impl Engine {
    /// Starts the engine, naming the connector (`fairlead-waf 0.1.0`) in its logs.
    pub fn new(connector: &str) -> Result<Arc<Self>, Error> {
        ffi::Engine::new(connector)
            .map(|e| Arc::new(Self(e)))
            .ok_or(Error::Init)
    }

    /// The engine's name and version (`ModSecurity v3.0.9 (Linux)`).
    pub fn version(&self) -> String {
        self.0.version()
    }

    /// Compiles `directives` (SecLang, `Include` of files allowed).
    pub fn compile(self: &Arc<Self>, directives: &str) -> Result<Rules, Error> {
        let set = ffi::Set::compile(directives).map_err(Error::Compile)?;
        Ok(Rules {
            set,
            engine: self.clone(),
        })
    }
}

/// A compiled rule set; requests of many threads are inspected against it at once.
pub struct Rules {
    // Dropped before the engine it was compiled by.
    set: ffi::Set,
    engine: Arc<Engine>,
}

/// A request as the engine sees it.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    /// The client's address (the one the proxy settled for).
    pub client: IpAddr,
    /// The client's port.
    pub client_port: u16,
    /// The address the request came in on.
    pub server: IpAddr,
    /// The port it came in on.
    pub server_port: u16,
    /// `GET`, `POST`, …
    pub method: &'a str,
    /// The path and query, as sent.
    pub uri: &'a str,
    /// `1.1`, `2`, …
    pub http_version: &'a str,
    /// The headers, `Host` among them.
    pub headers: &'a [(&'a [u8], &'a [u8])],
    /// The body (empty when none).
    pub body: &'a [u8],
}

/// A rule that matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Match {
    /// Its id (`942100`).
    pub id: String,
    /// Its message (`SQL Injection Attack Detected via libinjection`).
    pub message: String,
}

/// What the rules made of a request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The status to answer with when a rule interrupted the request (`SecRuleEngine On`).
    pub status: Option<u16>,
    /// The rules that matched and logged, in order.
    pub matches: Vec<Match>,
}

impl Rules {
    /// Runs `request` through the rules.
    pub fn inspect(&self, request: &Request<'_>) -> Verdict {
        let (status, lines) = self.set.run(&self.engine.0, request);
        Verdict {
            status,
            matches: lines.iter().filter_map(|l| parse(l)).collect(),
        }
    }
}

/// The id and message of a rule message (`… [id "942100"] … [msg "SQL Injection …"] …`).
fn parse(line: &str) -> Option<Match> {
    Some(Match {
        id: field(line, "id")?.to_owned(),
        message: field(line, "msg").unwrap_or_default().to_owned(),
    })
}

/// The value of `[name "value"]` in a rule message.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!("[{name} \""))? + name.len() + 3;
    let end = line[start..].find("\"]")?;
    Some(&line[start..start + end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(
        uri: &'a str,
        headers: &'a [(&'a [u8], &'a [u8])],
        body: &'a [u8],
    ) -> Request<'a> {
        Request {
            client: "192.0.2.7".parse().unwrap(),
            client_port: 40000,
            server: "127.0.0.1".parse().unwrap(),
            server_port: 8080,
            method: if body.is_empty() { "GET" } else { "POST" },
            uri,
            http_version: "1.1",
            headers,
            body,
        }
    }

    const HOST: &[(&[u8], &[u8])] = &[(b"Host", b"example.com"), (b"User-Agent", b"curl/8")];

    #[test]
    fn a_rule_blocks_and_names_itself() {
        let engine = Engine::new("fairlead-test").unwrap();
        assert!(
            engine.version().contains("ModSecurity"),
            "{}",
            engine.version()
        );
        let rules = engine
            .compile(
                "SecRuleEngine On\nSecRequestBodyAccess On\n\
                 SecRule ARGS:q \"@contains attack\" \"id:1001,phase:1,deny,status:403,log,msg:'Attack in q'\"\n\
                 SecRule REQUEST_BODY \"@contains evil\" \"id:1002,phase:2,deny,status:406,log,msg:'Evil body'\"",
            )
            .unwrap();
        let verdict = rules.inspect(&request("/search?q=an+attack", HOST, b""));
        assert_eq!(verdict.status, Some(403));
        assert_eq!(
            verdict.matches,
            vec![Match {
                id: "1001".into(),
                message: "Attack in q".into()
            }]
        );
        assert_eq!(
            rules.inspect(&request("/search?q=fine", HOST, b"")),
            Verdict::default()
        );
        let body = [
            (b"Host".as_slice(), b"example.com".as_slice()),
            (b"Content-Type", b"text/plain"),
        ];
        assert_eq!(
            rules.inspect(&request("/", &body, b"an evil body")).status,
            Some(406)
        );
    }

    #[test]
    fn detection_only_logs_without_interrupting() {
        let engine = Engine::new("fairlead-test").unwrap();
        let rules = engine
            .compile(
                "SecRuleEngine DetectionOnly\n\
                 SecRule ARGS:q \"@contains attack\" \"id:1001,phase:1,deny,status:403,log,msg:'Attack in q'\"",
            )
            .unwrap();
        let verdict = rules.inspect(&request("/?q=attack", HOST, b""));
        assert_eq!(verdict.status, None);
        assert_eq!(verdict.matches.len(), 1);
    }

    #[test]
    fn a_rule_that_does_not_compile_is_refused_with_the_engines_message() {
        let engine = Engine::new("fairlead-test").unwrap();
        let Err(Error::Compile(message)) =
            engine.compile("SecRule ARGS \"@rx a\" \"phase:1,deny\"")
        else {
            panic!("compiled");
        };
        assert!(message.contains("ID"), "{message}");
        assert!(engine.compile("SecNoSuchDirective On").is_err());
    }

    #[test]
    fn messages_give_id_and_text() {
        let line = "ModSecurity: Warning. Matched \"Operator `Rx' …\" [file \"x.conf\"] [line \"3\"] \
                    [id \"942100\"] [rev \"\"] [msg \"SQL Injection Attack Detected via libinjection\"] [data \"x\"]";
        assert_eq!(
            parse(line),
            Some(Match {
                id: "942100".into(),
                message: "SQL Injection Attack Detected via libinjection".into()
            })
        );
        assert_eq!(parse("no id here"), None);
    }
}
