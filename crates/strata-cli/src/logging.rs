//! Log output: plain `warning: …` lines for people by default, tracing's own format (time,
//! level, target) when `STRATA_LOG` asks for logs.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::registry::LookupSpan;

/// Installs the stderr logger: with `STRATA_LOG` set, tracing's format and that filter;
/// otherwise warnings and errors only, as `warning: …` / `error: …` lines.
pub fn init() {
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    match tracing_subscriber::EnvFilter::try_from_env("STRATA_LOG") {
        Ok(filter) => tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .with_env_filter(filter)
            .init(),
        Err(_) => tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_max_level(Level::WARN)
            .event_format(Plain)
            .init(),
    }
}

/// `warning: message` (the level as a word people read, then the message and its fields).
struct Plain;

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warning",
            Level::INFO => "info",
            _ => "debug",
        };
        write!(writer, "{level}: ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
