//! Server metrics: counters, gauges and histograms, rendered as Prometheus text (exposition
//! format 0.0.4) or JSON. Names follow vLLM's (`vllm:prompt_tokens_total` becomes
//! `strata:prompt_tokens_total`) where vLLM has one.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

use serde_json::{json, Value};

use crate::worker::{Finish, Stats};

/// Upper bounds (seconds) of the latency histograms' buckets.
const BUCKETS: [f64; 12] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, v: f64) {
        for (c, b) in self.counts.iter_mut().zip(BUCKETS) {
            if v <= b {
                *c += 1;
            }
        }
        self.count += 1;
        self.sum += v;
    }
}

#[derive(Debug, Default)]
struct Totals {
    prompt_tokens: u64,
    cached_tokens: u64,
    generation_tokens: u64,
    prompt_seconds: f64,
    decode_seconds: f64,
    finished: BTreeMap<&'static str, u64>,
    failed: u64,
    http: BTreeMap<(String, u16), u64>,
    e2e: Histogram,
    ttft: Histogram,
    queue: Histogram,
}

/// All metrics of one server. Shared by the handlers and the engine thread.
#[derive(Debug, Default)]
pub struct Metrics {
    waiting: AtomicI64,
    running: AtomicI64,
    totals: Mutex<Totals>,
}

/// The label of a finish reason (vLLM's `finished_reason`).
pub fn finish_label(f: &Finish) -> &'static str {
    match f {
        Finish::EndOfGeneration | Finish::Stop(_) => "stop",
        Finish::Length | Finish::ContextFull => "length",
        Finish::Cancelled => "abort",
    }
}

impl Metrics {
    fn totals(&self) -> std::sync::MutexGuard<'_, Totals> {
        // A panic while holding the lock cannot leave the counters inconsistent enough to matter.
        self.totals.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A job entered the queue.
    pub fn queued(&self) {
        self.waiting.fetch_add(1, Ordering::Relaxed);
    }

    /// A job left the queue.
    pub fn dequeued(&self) {
        self.waiting.fetch_sub(1, Ordering::Relaxed);
    }

    /// Jobs in the queue now.
    pub fn waiting(&self) -> i64 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Sets the number of jobs generating now.
    pub fn set_running(&self, n: i64) {
        self.running.store(n, Ordering::Relaxed);
    }

    /// A job ended without generating (skipped because its client left).
    pub fn finished(&self, f: &Finish) {
        *self.totals().finished.entry(finish_label(f)).or_default() += 1;
    }

    /// A job failed with an error.
    pub fn failed(&self) {
        self.totals().failed += 1;
    }

    /// A job finished: its tokens, times and finish reason.
    pub fn record(&self, s: &Stats) {
        let mut t = self.totals();
        t.prompt_tokens += s.prompt_tokens as u64;
        t.cached_tokens += s.cached_tokens as u64;
        t.generation_tokens += s.generated_tokens as u64;
        t.prompt_seconds += s.prompt_time.as_secs_f64();
        t.decode_seconds += s.decode_time.as_secs_f64();
        *t.finished.entry(finish_label(&s.finish)).or_default() += 1;
        t.e2e
            .observe((s.queue_time + s.prompt_time + s.decode_time).as_secs_f64());
        t.queue.observe(s.queue_time.as_secs_f64());
        if let Some(ft) = s.first_token {
            t.ttft.observe(ft.as_secs_f64());
        }
    }

    /// An HTTP response was sent for `route` (the matched route pattern) with `status`.
    pub fn http(&self, route: &str, status: u16) {
        *self
            .totals()
            .http
            .entry((route.to_string(), status))
            .or_default() += 1;
    }

    /// Prometheus text exposition.
    pub fn prometheus(&self, ready: bool) -> String {
        let t = self.totals();
        let mut o = String::new();
        family(
            &mut o,
            "strata:model_ready",
            "gauge",
            "1 when the model is loaded and requests are served.",
        );
        let _ = writeln!(o, "strata:model_ready {}", u8::from(ready));
        family(
            &mut o,
            "strata:num_requests_running",
            "gauge",
            "Requests generating now.",
        );
        let _ = writeln!(
            o,
            "strata:num_requests_running {}",
            self.running.load(Ordering::Relaxed)
        );
        family(
            &mut o,
            "strata:num_requests_waiting",
            "gauge",
            "Requests waiting in the queue.",
        );
        let _ = writeln!(o, "strata:num_requests_waiting {}", self.waiting().max(0));
        let counters = [
            (
                "strata:prompt_tokens",
                "Prompt tokens of finished requests.",
                t.prompt_tokens as f64,
            ),
            (
                "strata:generation_tokens",
                "Generated tokens.",
                t.generation_tokens as f64,
            ),
            (
                "strata:prefix_cache_queries",
                "Prompt tokens looked up in the conversation cache.",
                t.prompt_tokens as f64,
            ),
            (
                "strata:prefix_cache_hits",
                "Prompt tokens reused from the conversation cache.",
                t.cached_tokens as f64,
            ),
            (
                "strata:prompt_seconds",
                "Seconds spent reading prompts.",
                t.prompt_seconds,
            ),
            (
                "strata:decode_seconds",
                "Seconds spent generating.",
                t.decode_seconds,
            ),
            (
                "strata:request_failure",
                "Requests that failed inside the engine.",
                t.failed as f64,
            ),
        ];
        for (name, help, v) in counters {
            family(&mut o, name, "counter", help);
            let _ = writeln!(o, "{name}_total {v}");
        }
        family(
            &mut o,
            "strata:prompt_tokens_per_second",
            "gauge",
            "Prompt tokens computed per second, all requests.",
        );
        let _ = writeln!(
            o,
            "strata:prompt_tokens_per_second {}",
            rate(t.prompt_tokens - t.cached_tokens, t.prompt_seconds)
        );
        family(
            &mut o,
            "strata:generation_tokens_per_second",
            "gauge",
            "Tokens generated per second, all requests.",
        );
        let _ = writeln!(
            o,
            "strata:generation_tokens_per_second {}",
            rate(t.generation_tokens, t.decode_seconds)
        );
        family(
            &mut o,
            "strata:request_success",
            "counter",
            "Finished requests by finish reason.",
        );
        for (reason, n) in &t.finished {
            let _ = writeln!(
                o,
                "strata:request_success_total{{finished_reason=\"{reason}\"}} {n}"
            );
        }
        family(
            &mut o,
            "strata:http_requests",
            "counter",
            "HTTP responses by route and status.",
        );
        for ((route, status), n) in &t.http {
            let _ = writeln!(
                o,
                "strata:http_requests_total{{route=\"{}\",status=\"{status}\"}} {n}",
                route.replace(['"', '\\', '\n'], "_")
            );
        }
        let hists = [
            (
                "strata:e2e_request_latency_seconds",
                "Queue, prompt and generation time of a request.",
                &t.e2e,
            ),
            (
                "strata:time_to_first_token_seconds",
                "From queueing to the first generated token.",
                &t.ttft,
            ),
            (
                "strata:request_queue_time_seconds",
                "Time spent waiting in the queue.",
                &t.queue,
            ),
        ];
        for (name, help, h) in hists {
            family(&mut o, name, "histogram", help);
            for (b, c) in BUCKETS.iter().zip(h.counts) {
                let _ = writeln!(o, "{name}_bucket{{le=\"{b}\"}} {c}");
            }
            let _ = writeln!(
                o,
                "{name}_bucket{{le=\"+Inf\"}} {}\n{name}_sum {}\n{name}_count {}",
                h.count, h.sum, h.count
            );
        }
        o
    }

    /// The same numbers as JSON.
    pub fn json(&self, ready: bool) -> Value {
        let t = self.totals();
        let http: Vec<Value> = t
            .http
            .iter()
            .map(|((r, s), n)| json!({"route": r, "status": s, "count": n}))
            .collect();
        let hist = |h: &Histogram| json!({"count": h.count, "sum": h.sum});
        json!({
            "model_ready": ready,
            "num_requests_running": self.running.load(Ordering::Relaxed),
            "num_requests_waiting": self.waiting().max(0),
            "prompt_tokens_total": t.prompt_tokens,
            "generation_tokens_total": t.generation_tokens,
            "prefix_cache_queries_total": t.prompt_tokens,
            "prefix_cache_hits_total": t.cached_tokens,
            "prompt_seconds_total": t.prompt_seconds,
            "decode_seconds_total": t.decode_seconds,
            "prompt_tokens_per_second": rate(t.prompt_tokens - t.cached_tokens, t.prompt_seconds),
            "generation_tokens_per_second": rate(t.generation_tokens, t.decode_seconds),
            "request_success_total": t.finished,
            "request_failure_total": t.failed,
            "http_requests_total": http,
            "e2e_request_latency_seconds": hist(&t.e2e),
            "time_to_first_token_seconds": hist(&t.ttft),
            "request_queue_time_seconds": hist(&t.queue),
        })
    }
}

fn family(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn rate(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}
