//! `preemptor`: the command line. Parses arguments, sets up logging, and hands over to the
//! library; nothing else lives here.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "preemptor",
    version,
    about = "Suspend-or-shrink preemption for Hadoop YARN clusters running Docker containers",
    long_about = "Preemptor lets short, latency-sensitive YARN jobs take resources from long \
batch jobs without killing them: it suspends or shrinks the long jobs' Docker containers \
through their CPU and memory cgroups and gives the resources back later. It runs beside an \
unmodified YARN 3.3 or later and talks only to the RM/NM REST APIs and the Docker Engine API.\n\n\
Configuration lives in a Hadoop conf directory (default ./hadoop-conf): \
capacity-scheduler.xml for queues and preemptor-site.xml for Preemptor's settings.",
    after_help = "Start with `preemptor demo` to see it work on one machine, and \
`preemptor check-config` to validate a configuration directory."
)]
struct Cli {
    /// Log output format: `text` (the preemption log as plain lines) or `json` (one JSON
    /// object a line, preemption records with their fields; see docs/preemption-log.md).
    #[arg(long, global = true, value_enum, default_value_t = LogFormatArg::Text, env = "PREEMPTOR_LOG_FORMAT")]
    log_format: LogFormatArg,

    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    #[command(
        about = "Validate capacity-scheduler.xml and preemptor-site.xml and print the queue tree"
    )]
    CheckConfig(preemptor::check_config::CheckConfigArgs),
    #[command(
        about = "Run the node agent on a NodeManager host (suspends, shrinks, resumes containers)"
    )]
    Agent(Box<preemptor::agent::cli::AgentArgs>),
    #[command(about = "Run the controller beside the ResourceManager (observe, decide, act)")]
    Controller(preemptor::controller::cli::ControllerArgs),
    #[command(
        about = "Run an emulated YARN (RM + NodeManagers) whose containers are real Docker containers"
    )]
    Emulate(preemptor::emulator::cli::EmulateArgs),
    #[command(
        about = "Run one emulated YARN NodeManager as its own process, for `emulate --nodemanager`"
    )]
    Nodemanager(preemptor::emulator::nodemanager::cli::NodemanagerArgs),
    #[command(about = "Run emulator, agent and controller on this machine and compare policies")]
    Demo(preemptor::demo::DemoArgs),
    #[command(about = "Simulate policies and schedulers on a job trace at datacenter scale")]
    Sim(preemptor::sim::cli::SimArgs),
    #[command(about = "Follow a controller's preemption log")]
    Logs(preemptor::controller::cli::LogsArgs),
    #[command(
        about = "Show what a running controller holds: held containers, node capacities, leases"
    )]
    Status(preemptor::controller::status::StatusArgs),
    #[command(about = "Create bearer-token files for the agent and controller APIs")]
    Token(TokenArgs),
    #[command(
        about = "Resume a container the controller holds (and exempt it), or everything with --all"
    )]
    Resume(preemptor::controller::ops::ResumeArgs),
    #[command(
        about = "Put raised nodes back at their physical capacity: through the running controller, else from its record"
    )]
    RestoreCapacities(preemptor::controller::restore::RestoreCapacitiesArgs),
}

#[derive(clap::Args)]
#[command(
    long_about = "Create bearer-token files: 32 random bytes from the kernel, written as 64 hex \
digits to each FILE that does not exist yet, with mode 600 (what the agent and controller \
demand). A FILE that already holds a valid token is kept, so the command is safe to re-run; \
one that fails the checks (group- or world-readable, empty, not a regular file) is an error \
and is left untouched.",
    after_help = "Example: preemptor token /etc/preemptor/agent.token"
)]
struct TokenArgs {
    /// Token files to create.
    #[arg(required = true)]
    files: Vec<std::path::PathBuf>,
}

fn create_tokens(args: &TokenArgs) -> anyhow::Result<()> {
    use preemptor::tokens::{TokenFile, create_token_file};
    for f in &args.files {
        let done = create_token_file(f)?;
        let said = match done {
            TokenFile::Created => "created",
            TokenFile::Kept => "kept (already a valid token file)",
        };
        println!("{}: {said}", f.display());
    }
    Ok(())
}

fn init_tracing(format: LogFormatArg) {
    use std::io::IsTerminal;
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::filter_fn;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    use preemptor::controller::log::{PreemptionFormat, TARGET};

    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormatArg::Text => {
            let ansi = std::io::stderr().is_terminal();
            // The preemption log carries its own time and fields: print its line alone.
            let general = tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(ansi)
                .with_filter(filter_fn(|m| m.target() != TARGET));
            let preemption = tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .event_format(PreemptionFormat { ansi })
                .with_filter(filter_fn(|m| m.target() == TARGET));
            registry.with(general).with(preemption).init();
        }
        LogFormatArg::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::stderr),
            )
            .init(),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.log_format);
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", preemptor::error_chain(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::CheckConfig(args) => Ok(preemptor::check_config::run(&args)),
        Command::Agent(args) => {
            runtime()?.block_on(preemptor::agent::cli::run(*args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Controller(args) => {
            runtime()?.block_on(preemptor::controller::cli::run(args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Emulate(args) => {
            runtime()?.block_on(preemptor::emulator::cli::run(args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Nodemanager(args) => {
            runtime()?.block_on(preemptor::emulator::nodemanager::cli::run(args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo(args) => {
            runtime()?.block_on(preemptor::demo::demo(args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Sim(args) => {
            preemptor::sim::cli::run(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Logs(args) => {
            runtime()?.block_on(preemptor::controller::cli::logs(args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Status(args) => {
            runtime()?.block_on(preemptor::controller::status::status(args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Resume(args) => {
            runtime()?.block_on(preemptor::controller::ops::resume(args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Token(args) => {
            create_tokens(&args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::RestoreCapacities(args) => {
            Ok(runtime()?.block_on(preemptor::controller::restore::run(args))?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `ExecStart` words of a systemd unit, with `${VAR}` filled from its
    /// `Environment=` lines, as systemd would run them.
    fn exec_start(unit: &str) -> Vec<String> {
        let env: Vec<(&str, &str)> = unit
            .lines()
            .filter_map(|l| l.strip_prefix("Environment="))
            .filter_map(|kv| kv.split_once('='))
            .collect();
        let line = unit
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .expect("the unit has an ExecStart line");
        line.split_whitespace()
            .map(|w| {
                env.iter().fold(w.to_string(), |w, (k, v)| {
                    w.replace(&format!("${{{k}}}"), v)
                })
            })
            .collect()
    }

    /// Every `preemptor ...` (or `cargo run --release -- ...`) command in the shell blocks of
    /// README.md and docs/*.md, with the file and line it starts on.
    fn documented_commands() -> Vec<(String, Vec<String>)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = vec![root.join("README.md")];
        let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
            .expect("docs/")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        docs.sort();
        files.extend(docs);
        let mut out = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).expect("readable doc");
            let mut in_shell = false;
            let mut pending: Option<(usize, String)> = None;
            for (i, line) in text.lines().enumerate() {
                let t = line.trim();
                if let Some(lang) = t.strip_prefix("```") {
                    in_shell = !in_shell && matches!(lang, "sh" | "bash" | "shell" | "console");
                    continue;
                }
                if !in_shell {
                    continue;
                }
                let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
                joined.push_str(t.trim_start_matches("$ "));
                if let Some(rest) = joined.strip_suffix('\\') {
                    pending = Some((start, format!("{rest} ")));
                    continue;
                }
                let code = joined.split(" #").next().unwrap_or_default();
                for segment in code.split(['|', ';']).flat_map(|s| s.split("&&")) {
                    let words: Vec<String> =
                        segment.split_whitespace().map(str::to_string).collect();
                    let args = match words.iter().map(String::as_str).collect::<Vec<_>>()[..] {
                        ["preemptor", ..] => words[1..].to_vec(),
                        ["cargo", "run", "--release", "--", ..] => words[4..].to_vec(),
                        _ => continue,
                    };
                    let place = format!("{}:{start}", file.display());
                    out.push((place, args));
                }
            }
        }
        out
    }

    #[test]
    fn every_command_in_the_docs_is_one_this_binary_accepts() {
        let commands = documented_commands();
        assert!(commands.len() >= 20, "found only {commands:?}");
        for (place, args) in commands {
            let words = std::iter::once("preemptor".to_string()).chain(args.iter().cloned());
            if let Err(e) = Cli::try_parse_from(words) {
                panic!(
                    "{place}: `preemptor {}` does not parse: {e}",
                    args.join(" ")
                );
            }
        }
    }

    #[test]
    fn subcommand_help_keeps_each_commands_long_description() {
        // A doc comment on a variant would reset the long description its arguments set.
        let cli = <Cli as clap::CommandFactory>::command();
        for name in [
            "controller",
            "emulate",
            "nodemanager",
            "token",
            "status",
            "resume",
            "restore-capacities",
        ] {
            let sub = cli
                .find_subcommand(name)
                .unwrap_or_else(|| panic!("no subcommand {name}"));
            assert!(sub.get_about().is_some(), "{name} has no summary");
            assert!(
                sub.get_long_about().is_some(),
                "`preemptor {name} --help` lost its long description"
            );
        }
    }

    #[test]
    fn the_shipped_systemd_units_start_commands_this_binary_accepts() {
        let units = [
            (
                "agent",
                include_str!("../deploy/systemd/preemptor-agent.service"),
            ),
            (
                "controller",
                include_str!("../deploy/systemd/preemptor-controller.service"),
            ),
        ];
        for (name, unit) in units {
            let mut words = exec_start(unit);
            assert_eq!(words[0], "/usr/bin/preemptor");
            assert_eq!(words[1], name);
            assert!(
                !words.iter().any(|w| w.contains('$')),
                "{name}: unfilled variable in {words:?}"
            );
            words[0] = "preemptor".into();
            let cli = Cli::try_parse_from(&words)
                .unwrap_or_else(|e| panic!("{name}: {words:?} does not parse: {e}"));
            match (name, cli.command) {
                ("agent", Command::Agent(a)) => {
                    // Loopback unless the operator sets the cluster-network address.
                    assert_eq!(a.listen.ip().to_string(), "127.0.0.1");
                }
                ("controller", Command::Controller(_)) => {}
                _ => panic!("{name}: ExecStart runs another subcommand"),
            }
        }
    }
}
