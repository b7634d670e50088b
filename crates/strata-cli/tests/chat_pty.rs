//! `strata chat` driven through a pseudo-terminal, as a person uses it: Ctrl-C during an
//! answer stops the answer and the conversation goes on (the next turn reuses the cached
//! prefix); Ctrl-C at an empty prompt asks for Ctrl-D or /bye; `/clear` says what it did;
//! `/bye` ends the program. The model is SmolLM2-135M (missing, the test fails).

mod common;

use std::process::Command;
use std::time::Duration;

use rexpect::session::spawn_command;

#[test]
fn ctrl_c_stops_the_answer_not_the_chat() {
    let model = common::smollm2();
    let home = common::temp_dir("chat-pty");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata"));
    cmd.args(["chat", "--temp", "0", "-n", "-1", "--ctx", "4096", "-m"])
        .arg(&model)
        // The line editor's history goes to $HOME/.cache/strata; keep it out of the real one.
        .env("HOME", &home)
        .env("TERM", "xterm")
        .env_remove("STRATA_LOG");
    let mut p = spawn_command(cmd, Some(120_000)).expect("strata chat starts on a pty");
    p.exp_string(">>> ").expect("the prompt");

    // A long answer: Ctrl-C once some of it is on the screen.
    // Greedy SmolLM2 writes this story until its context is full (about 4000 tokens).
    p.send_line("Write a long story about a dragon who learns to fly.")
        .unwrap();
    p.exp_string("learns to fly.").expect("the line is echoed");
    p.exp_regex(r"\w+\s+\w+\s+\w+\s+\w+\s+\w+")
        .expect("the answer starts");
    p.send_control('c').unwrap();
    p.exp_string("[stopped]").expect("Ctrl-C stops the answer");
    p.exp_string(">>> ").expect("and the chat goes on");

    // Ctrl-C at an empty prompt does not end the program.
    p.send_control('c').unwrap();
    p.exp_string("Use Ctrl-D or /bye to exit.").unwrap();
    p.exp_string(">>> ").unwrap();

    // The next turn continues the conversation: its prompt starts with the cached one.
    // It asks for another long story: how the stopped answer ends depends on when Ctrl-C
    // landed, and "go on" after some cuts gets a one-line reply that ends before Ctrl-C.
    p.send_line("Now write a long story about a knight who learns to swim.")
        .unwrap();
    p.exp_string("learns to swim.").unwrap();
    p.exp_regex(r"\w+\s+\w+\s+\w+").unwrap();
    p.send_control('c').unwrap();
    p.exp_string("[stopped]").unwrap();
    let (_, stats) = p
        .exp_regex(r"\[\d+ prompt tokens \(\d+ cached\)")
        .expect("the turn's stats line");
    let cached: usize = stats
        .split('(')
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(cached > 10, "the second turn reuses the first: {stats}");
    p.exp_string(">>> ").unwrap();

    p.send_line("/clear").unwrap();
    p.exp_string("Cleared the conversation (2 turns forgotten).")
        .unwrap();
    p.send_line("/bye").unwrap();
    p.exp_eof().expect("/bye ends the program");
    let status = p.process_mut().wait().unwrap();
    let status = format!("{status:?}");
    assert!(
        status.starts_with("Exited(") && status.ends_with(", 0)"),
        "{status}"
    );
    std::thread::sleep(Duration::from_millis(10));
    assert!(
        home.join(".cache/strata/chat_history").exists(),
        "the line editor keeps a history"
    );
    let _ = std::fs::remove_dir_all(&home);
}
