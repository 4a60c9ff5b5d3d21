//! The preemption log: one line per action, through tracing, on its own target so an
//! operator can route or filter it (`RUST_LOG=preemptor::preemption=info`).
//!
//! Every record is emitted with structured fields (for `--log-format json`) and a message
//! that is the human-readable line; [`PreemptionFormat`] prints that line alone, coloured
//! when the log goes to a terminal. The format is documented in docs/preemption-log.md.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use super::hub::{ActionRecord, Amounts, Outcome};

/// The tracing target of the preemption log.
pub const TARGET: &str = "preemptor::preemption";

/// Writes one preemption log line.
pub fn emit(record: &ActionRecord) {
    let (outcome, failure) = match &record.outcome {
        Outcome::Applied => ("applied", ""),
        Outcome::Observed => ("observed", ""),
        Outcome::Failed { reason } => ("failed", reason.as_str()),
    };
    tracing::info!(
        target: TARGET,
        at_ms = record.at_ms,
        policy = %record.policy,
        action = %record.action,
        container = record.container.as_deref().unwrap_or("-"),
        application = record.application.as_deref().unwrap_or("-"),
        queue = record.queue.as_deref().unwrap_or("-"),
        node = record.node.as_deref().unwrap_or("-"),
        before = %record.before,
        after = %record.after,
        before_memory_mb = record.amounts.before_memory_mb,
        before_vcores = record.amounts.before_vcores,
        after_memory_mb = record.amounts.after_memory_mb,
        after_vcores = record.amounts.after_vcores,
        reason = %record.reason,
        latency_ms = record.latency_ms,
        outcome,
        failure,
        "{}",
        line(record)
    );
}

/// The record as one plain line (no colour).
pub fn line(record: &ActionRecord) -> String {
    render(record, false)
}

/// The record as one line, with ANSI colours when `colour` is set.
///
/// `2026-11-21T16:13:27.123Z graceful shrink container_1_0001_01_000002
/// app=application_1_0001 queue=root.long node=nm1:8042 <4096 MB, 2 vcores> -> <2048 MB,
/// 1 vcores> latency=12ms applied: queue root.short under guarantee`
pub fn render(record: &ActionRecord, colour: bool) -> String {
    let paint = |code: &str, text: &str| {
        if colour {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    };
    let action_colour = match record.action.as_str() {
        "kill" => "1;31",
        "suspend" => "31",
        "shrink" => "33",
        "resume" => "32",
        _ => "36",
    };
    let mut out = String::with_capacity(200);
    out.push_str(&paint("2", &utc_millis(record.at_ms)));
    out.push(' ');
    out.push_str(&record.policy);
    out.push(' ');
    out.push_str(&paint(action_colour, &record.action));
    let target = record
        .container
        .as_deref()
        .or(record.node.as_deref())
        .unwrap_or("-");
    out.push(' ');
    out.push_str(&paint("1", target));
    for (key, value) in [
        ("app", &record.application),
        ("queue", &record.queue),
        ("node", &record.node),
    ] {
        // A node-level action names the node as its target already.
        if key == "node" && record.container.is_none() {
            continue;
        }
        if let Some(v) = value {
            let _ = write!(out, " {key}={v}");
        }
    }
    let _ = write!(out, " {} -> {}", record.before, record.after);
    if let Some(ms) = record.latency_ms {
        let _ = write!(out, " latency={ms}ms");
    }
    out.push(' ');
    match &record.outcome {
        Outcome::Applied => out.push_str(&paint("32", "applied")),
        Outcome::Observed => out.push_str(&paint("2", "observed (observe_only)")),
        Outcome::Failed { reason } => {
            out.push_str(&paint("1;31", &format!("FAILED ({reason})")));
        }
    }
    out.push_str(": ");
    out.push_str(&record.reason);
    out
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (RFC 3339, UTC) for Unix milliseconds; a time past year
/// 9999 prints as its milliseconds.
pub fn utc_millis(at_ms: u64) -> String {
    const FORMAT: &[time::format_description::BorrowedFormatItem<'_>] = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(at_ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(FORMAT).ok())
        .unwrap_or_else(|| format!("{at_ms} ms"))
}

/// Text-mode formatter for the preemption target: the line alone, without tracing's own
/// timestamp, level and field dump (the line carries all of them).
pub struct PreemptionFormat {
    pub ansi: bool,
}

impl<S, N> FormatEvent<S, N> for PreemptionFormat
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        match fields.record() {
            Some(record) => writeln!(writer, "{}", render(&record, self.ansi)),
            // Something else logged on this target: keep its message.
            None => writeln!(
                writer,
                "{}",
                fields.text.get("message").map_or("", String::as_str)
            ),
        }
    }
}

#[derive(Default)]
struct Fields {
    text: BTreeMap<&'static str, String>,
    numbers: BTreeMap<&'static str, u64>,
    fractions: BTreeMap<&'static str, f64>,
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.numbers.insert(field.name(), value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.fractions.insert(field.name(), value);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.text.insert(field.name(), value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.text.insert(field.name(), format!("{value:?}"));
    }
}

impl Fields {
    /// Rebuilds the record [`emit`] logged, so text mode can colour its parts.
    fn record(&self) -> Option<ActionRecord> {
        let text = |k: &str| self.text.get(k).cloned();
        let optional = |k: &str| text(k).filter(|v| v != "-");
        let outcome = match text("outcome")?.as_str() {
            "applied" => Outcome::Applied,
            "observed" => Outcome::Observed,
            _ => Outcome::Failed {
                reason: text("failure").unwrap_or_default(),
            },
        };
        Some(ActionRecord {
            at_ms: *self.numbers.get("at_ms")?,
            policy: text("policy")?,
            action: text("action")?,
            container: optional("container"),
            application: optional("application"),
            queue: optional("queue"),
            node: optional("node"),
            before: text("before")?,
            after: text("after")?,
            amounts: Amounts {
                before_memory_mb: self.numbers.get("before_memory_mb").copied(),
                before_vcores: self.fractions.get("before_vcores").copied(),
                after_memory_mb: self.numbers.get("after_memory_mb").copied(),
                after_vcores: self.fractions.get("after_vcores").copied(),
            },
            reason: text("reason")?,
            latency_ms: self.numbers.get("latency_ms").copied(),
            outcome,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::controller::hub::sample_record as record;
    use tracing_subscriber::fmt::MakeWriter;

    #[test]
    fn line_holds_every_part_of_the_record() {
        assert_eq!(
            line(&record(Outcome::Applied)),
            "2026-11-21T16:13:27.123Z graceful shrink container_1_0001_01_000002 \
             app=application_1_0001 queue=root.long node=nm1:8042 \
             <4096 MB, 2 vcores> -> <2048 MB, 1 vcores> latency=12ms applied: \
             queue root.short under guarantee"
        );
        let failed = line(&record(Outcome::Failed {
            reason: "agent timed out".into(),
        }));
        assert!(failed.contains(" FAILED (agent timed out): queue root.short"));
    }

    #[test]
    fn node_actions_name_the_node_once() {
        let mut r = record(Outcome::Observed);
        r.action = "set-node-capacity".into();
        r.container = None;
        r.application = None;
        r.queue = None;
        r.latency_ms = None;
        assert_eq!(
            line(&r),
            "2026-11-21T16:13:27.123Z graceful set-node-capacity nm1:8042 \
             <4096 MB, 2 vcores> -> <2048 MB, 1 vcores> observed (observe_only): \
             queue root.short under guarantee"
        );
    }

    #[test]
    fn colours_only_when_asked() {
        let r = record(Outcome::Applied);
        assert!(!line(&r).contains('\x1b'));
        let coloured = render(&r, true);
        assert!(coloured.contains("\x1b[33mshrink\x1b[0m"), "{coloured}");
        let stripped: String = {
            let mut s = coloured.clone();
            for code in ["\x1b[0m", "\x1b[1;31m", "\x1b[31m", "\x1b[33m", "\x1b[32m"] {
                s = s.replace(code, "");
            }
            s.replace("\x1b[2m", "").replace("\x1b[1m", "")
        };
        assert_eq!(stripped, line(&r));
    }

    #[test]
    fn dates_match_known_days() {
        assert_eq!(utc_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_millis(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc_millis(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
        assert_eq!(utc_millis(u64::MAX), format!("{} ms", u64::MAX));
    }

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().map_err(|_| io::ErrorKind::Other)?.extend(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Buffer {
            self.clone()
        }
    }

    fn captured(buf: &Buffer) -> String {
        String::from_utf8(buf.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn text_subscriber_prints_the_line_alone() {
        let buf = Buffer::default();
        let sub = tracing_subscriber::fmt()
            .with_writer(buf.clone())
            .event_format(PreemptionFormat { ansi: false })
            .finish();
        let failed = record(Outcome::Failed {
            reason: "agent timed out".into(),
        });
        tracing::subscriber::with_default(sub, || emit(&failed));
        assert_eq!(captured(&buf), format!("{}\n", line(&failed)));
    }

    #[test]
    fn json_subscriber_gets_structured_fields() {
        let buf = Buffer::default();
        let sub = tracing_subscriber::fmt()
            .with_writer(buf.clone())
            .json()
            .finish();
        let r = record(Outcome::Applied);
        tracing::subscriber::with_default(sub, || emit(&r));
        let v: serde_json::Value = serde_json::from_str(captured(&buf).trim()).unwrap();
        assert_eq!(v["target"], TARGET);
        let f = &v["fields"];
        assert_eq!(f["message"], line(&r));
        assert_eq!(f["at_ms"], 1_795_277_607_123u64);
        assert_eq!(f["container"], "container_1_0001_01_000002");
        assert_eq!(f["queue"], "root.long");
        assert_eq!(f["before"], "<4096 MB, 2 vcores>");
        assert_eq!(f["latency_ms"], 12);
        assert_eq!(f["outcome"], "applied");
        // Numbers a log pipeline can sum, beside the rendered strings.
        assert_eq!(f["before_memory_mb"], 4096);
        assert_eq!(f["before_vcores"], 2.0);
        assert_eq!(f["after_memory_mb"], 2048);
        assert_eq!(f["after_vcores"], 1.0);
        // A kill has no amount after it: the field is left out, not zero.
        let mut kill = record(Outcome::Applied);
        kill.action = "kill".into();
        kill.amounts.after_memory_mb = None;
        kill.amounts.after_vcores = None;
        let buf = Buffer::default();
        let sub = tracing_subscriber::fmt()
            .with_writer(buf.clone())
            .json()
            .finish();
        tracing::subscriber::with_default(sub, || emit(&kill));
        let v: serde_json::Value = serde_json::from_str(captured(&buf).trim()).unwrap();
        assert!(v["fields"].get("after_memory_mb").is_none(), "{v}");
        assert_eq!(v["fields"]["before_memory_mb"], 4096);
    }

    #[test]
    fn the_text_format_rebuilds_the_amounts_it_was_given() {
        let mut fields = Fields::default();
        let r = record(Outcome::Applied);
        fields.numbers.insert("at_ms", r.at_ms);
        fields.numbers.insert("before_memory_mb", 4096);
        fields.fractions.insert("after_vcores", 0.01);
        for (k, v) in [
            ("policy", "graceful"),
            ("action", "shrink"),
            ("before", "<4096 MB, 2 vcores>"),
            ("after", "<64 MB, 0.010 vcores>"),
            ("reason", "r"),
            ("outcome", "applied"),
        ] {
            fields.text.insert(k, v.to_string());
        }
        let rebuilt = fields.record().expect("a record");
        assert_eq!(rebuilt.amounts.before_memory_mb, Some(4096));
        assert_eq!(rebuilt.amounts.after_vcores, Some(0.01));
        assert_eq!(rebuilt.amounts.after_memory_mb, None);
    }
}
