//! The command line (DESIGN.md "Commands": the contract).

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use gpuaudit_core::render::Format;
use gpuaudit_core::Profile;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "gpuaudit",
    version,
    about = "Tells the owner of a GPU machine what they really got",
    long_about = "Audits this machine (or a snapshot of one): reads the GPUs, the driver and the host, \
                  measures what must be measured, compares every figure with the datasheet, and says \
                  what is wrong, what it costs, how to check it by hand and how to fix it. It never \
                  changes the machine.\n\nExit status: 0 no check failed, 1 a check failed, 2 gpuaudit \
                  could not do its job.",
    after_help = "With no command, `gpuaudit` runs `gpuaudit audit`."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub audit: AuditArgs,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Audit this machine: facts + quick measurements (the default command).
    Audit(AuditArgs),
    /// Write a snapshot of this machine (facts only), for an offline audit with --root.
    Collect(CollectArgs),
    /// List every check id with its one-line description.
    Checks,
    /// List every GPU model the spec database knows, with the names --expect accepts.
    Models {
        #[arg(long, value_enum, ignore_case = true, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// What a check looks at, why it matters, how to verify it by hand, and the fix.
    Explain {
        /// A check id, e.g. pcie.link (see `gpuaudit checks`); case does not matter.
        #[arg(value_parser = Suggest(check_ids), hide_possible_values = true)]
        id: String,
    },
    /// Run measurements alone, with their full tables (sizes, per GPU, matrices).
    Bench(BenchArgs),
    /// Sustained GEMM load on every GPU with clock/power/temperature/throttle sampling.
    Burn(BurnArgs),
    /// Render a saved JSON report again (another format, another file), without auditing.
    Report(ReportArgs),
    /// Summarise many nodes' JSON reports: one row per node, the nodes slower than their
    /// peers, configuration drift, the checks failing on several nodes.
    ///
    /// Exit status: 0 no node failed a check, 1 a node failed one or its file is not a report,
    /// 2 no report could be read at all (or an argument is wrong).
    Fleet(FleetArgs),
    /// Several machines' JSON reports side by side: the key figures (the best marked, the
    /// rows that differ highlighted), every check's status, the configuration.
    ///
    /// Exit status: 0 rendered, 2 a file is not a report or an argument is wrong.
    Compare(CompareArgs),
    /// Print the JSON Schema of the JSON report (gpuaudit.report/1).
    Schema,
    /// Print the shell completion script for SHELL.
    ///
    /// e.g. `gpuaudit completions bash > ~/.local/share/bash-completion/completions/gpuaudit`,
    /// `gpuaudit completions zsh > ~/.zfunc/_gpuaudit`,
    /// `gpuaudit completions fish > ~/.config/fish/completions/gpuaudit.fish`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write one page per command into a directory.
    Man {
        /// Write gpuaudit.1 and gpuaudit-COMMAND.1 into DIR (created where missing) instead.
        // `--out` was its first name: a hidden alias, as collect's.
        #[arg(long = "output", short = 'o', alias = "out", value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Run a training-shaped pipeline end to end and say which stage starves the GPU.
    Rehearse(RehearseArgs),
    /// A Prometheus exporter: the facts-only audit every --interval, on /metrics and /healthz.
    Serve(ServeArgs),
}

impl Cli {
    /// The command line of this process; see [`Cli::parse_from_args`].
    pub fn parse_args() -> Result<Cli, clap::Error> {
        Cli::parse_from_args(std::env::args_os())
    }

    /// The command line, with the audit's options taken before `audit` as after it:
    /// `gpuaudit --root X audit` is `gpuaudit audit --root X` (the bare `gpuaudit --root X`
    /// is the audit, so the options are read at the top too). Before another command they
    /// are refused, naming them: `gpuaudit --root X serve` would otherwise ignore them.
    pub fn parse_from_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::{CommandFactory, FromArgMatches};
        let mut cmd = Cli::command();
        let m = cmd.try_get_matches_from_mut(args)?;
        let mut cli = Cli::from_arg_matches(&m)?;
        // Arguments only (the ids of flattened groups, `JudgeArgs`, are in the matches too).
        let args: std::collections::HashSet<String> = cmd
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .collect();
        let given = |m: &clap::ArgMatches| -> Vec<String> {
            m.ids()
                .filter(|id| args.contains(id.as_str()))
                .filter(|id| {
                    m.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
                })
                .map(|id| id.as_str().to_string())
                .collect()
        };
        let top = given(&m);
        if top.is_empty() {
            return Ok(cli);
        }
        let flag = |id: &str| {
            cmd.get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_long())
                .map(|l| format!("--{l}"))
                .unwrap_or_else(|| id.to_string())
        };
        match (&mut cli.command, m.subcommand()) {
            (None, _) => Ok(cli),
            (Some(Command::Audit(sub)), Some((_, sm))) => {
                let inner = given(sm);
                for id in &top {
                    if inner.contains(id) && id != "data_dirs" {
                        return Err(cmd.error(
                            clap::error::ErrorKind::ArgumentConflict,
                            format!(
                                "{} is given both before and after `audit`: give it once",
                                flag(id)
                            ),
                        ));
                    }
                    sub.take(&cli.audit, id);
                }
                for (a, b) in [("full", "facts_only"), ("verbose", "quiet")] {
                    let set = |id: &str| top.iter().chain(&inner).any(|x| x == id);
                    if set(a) && set(b) {
                        return Err(cmd.error(
                            clap::error::ErrorKind::ArgumentConflict,
                            format!("{} cannot be used with {}", flag(a), flag(b)),
                        ));
                    }
                }
                Ok(cli)
            }
            (Some(_), Some((name, _))) => {
                let flags: Vec<String> = top.iter().map(|id| flag(id)).collect();
                Err(cmd.error(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!(
                        "{} {} the audit's, not `gpuaudit {name}`'s: put {} after `gpuaudit {name}` \
                         if it takes {}, or audit with `gpuaudit {}`",
                        flags.join(", "),
                        if flags.len() == 1 { "is" } else { "are" },
                        if flags.len() == 1 { "it" } else { "them" },
                        if flags.len() == 1 { "it" } else { "them" },
                        flags.join(" ")
                    ),
                ))
            }
            (Some(_), None) => Ok(cli),
        }
    }
}

impl AuditArgs {
    /// The option `id` as `from` has it (the audit's options given before `audit`).
    /// Every id of [`AuditArgs`] is taken here (a test gives each).
    fn take(&mut self, from: &AuditArgs, id: &str) {
        match id {
            "full" => self.full = from.full,
            "facts_only" => self.facts_only = from.facts_only,
            "root" => self.root = from.root.clone(),
            "expect" => self.judge.expect = from.judge.expect.clone(),
            "profile" => self.judge.profile = from.judge.profile,
            // Repeatable: those before, then those after.
            "data_dirs" => {
                let mut d = from.judge.data_dirs.clone();
                d.append(&mut self.judge.data_dirs);
                self.judge.data_dirs = d;
            }
            "concurrency" => self.judge.concurrency = from.judge.concurrency,
            "gpus" => self.judge.gpus = from.judge.gpus.clone(),
            "format" => self.format = from.format,
            "output" => self.output = from.output.clone(),
            "force" => self.force = from.force,
            "redact" => self.redact = from.redact,
            "verbose" => self.verbose = from.verbose,
            "quiet" => self.quiet = from.quiet,
            "color" => self.color = from.color,
            _ => {}
        }
    }
}

/// `gpuaudit serve`'s port when --listen names none: the Prometheus wiki's "Default port
/// allocations" list has every port of 9100-9999 taken (dcgm-exporter is 9400) and goes on
/// above 10000; 10459 was not on it when this was written (README "Clusters").
pub const SERVE_DEFAULT_PORT: u16 = 10459;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Where to listen for scrapes (0.0.0.0:PORT or [::]:PORT for every interface; port 0
    /// picks a free one, printed on stderr).
    #[arg(long, value_name = "ADDR:PORT", default_value_t = std::net::SocketAddr::from(([127, 0, 0, 1], SERVE_DEFAULT_PORT)))]
    pub listen: std::net::SocketAddr,
    /// How often the facts are read again and judged (e.g. 60s, 5m; at least 1 s, at most
    /// 1 day).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_interval)]
    pub interval: std::time::Duration,
    /// Serve the audit of a snapshot directory instead of this machine (re-read every
    /// interval).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Also run the quick measurements this often (e.g. 6h); never on a GPU other processes
    /// use; at most 30 days. Without it, nothing is measured.
    #[arg(long, value_name = "DURATION", value_parser = parse_measure_every, conflicts_with = "root")]
    pub measure_every: Option<std::time::Duration>,
    #[command(flatten)]
    pub judge: JudgeArgs,
}

/// What the verdicts are judged against, as the audit and `gpuaudit serve` take it.
#[derive(Args, Debug, Default, Clone)]
pub struct JudgeArgs {
    /// What was ordered, e.g. h100-sxm5-80gb:8, a100:2, h200: model and count are checked
    /// (`gpuaudit models` lists the model names).
    #[arg(
        long,
        value_name = "MODEL[:COUNT]",
        value_parser = Suggest(model_names),
        hide_possible_values = true
    )]
    pub expect: Option<String>,
    /// The workload: raises or lowers the severity of the checks that matter for it.
    #[arg(
        long,
        value_name = "PROFILE",
        default_value = "general",
        ignore_case = true,
        value_parser = profile_parser()
    )]
    pub profile: Profile,
    /// Where datasets and models live (storage checks); repeatable.
    #[arg(long = "data-dir", value_name = "PATH")]
    pub data_dirs: Vec<PathBuf>,
    /// How many connections a server on this machine must be able to queue (net.somaxconn;
    /// default 1024 with --profile inference).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<u32>,
    /// Only these GPU indices, e.g. 0,1 or 0-3.
    #[arg(long, value_name = "LIST")]
    pub gpus: Option<String>,
}

/// The longest `--interval`: an exporter that looks once a day is already no monitor (its
/// /healthz is stale after 3 intervals), and a bound keeps every sum of instants finite.
pub const SERVE_MAX_INTERVAL: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
/// The longest `--measure-every` (30 days).
pub const SERVE_MAX_MEASURE_EVERY: std::time::Duration =
    std::time::Duration::from_secs(30 * 24 * 3600);

/// "60s", "5m", "1h 30m" (humantime); at least a second.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| match e {
        // humantime says "time unit needed, for example 5sec or 5ms", and 5ms is then
        // refused (at least 1s): suggest what is accepted.
        humantime::DurationError::UnknownUnit { unit, value, .. } if unit.is_empty() => {
            format!("'{s}': a duration needs its unit: {value}s (seconds), {value}m or {value}h")
        }
        e => format!("'{s}': {e} (e.g. 60s, 5m, 6h)"),
    })?;
    if d < std::time::Duration::from_secs(1) {
        return Err(format!("'{s}': at least 1s"));
    }
    Ok(d)
}

/// [`parse_duration`], at most `max`.
fn parse_duration_within(
    s: &str,
    max: std::time::Duration,
    max_text: &str,
) -> Result<std::time::Duration, String> {
    let d = parse_duration(s)?;
    if d > max {
        return Err(format!("'{s}': at most {max_text}"));
    }
    Ok(d)
}

/// `--interval`: 1s to 1 day.
pub fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    parse_duration_within(s, SERVE_MAX_INTERVAL, "1 day (24h)")
}

/// `--measure-every`: 1s to 30 days.
pub fn parse_measure_every(s: &str) -> Result<std::time::Duration, String> {
    parse_duration_within(s, SERVE_MAX_MEASURE_EVERY, "30 days (720h)")
}

#[derive(Args, Debug)]
pub struct RehearseArgs {
    /// Read the samples from this directory's files (default: a dataset gpuaudit writes in a
    /// temporary directory and removes).
    #[arg(long = "data-dir", value_name = "PATH")]
    pub data_dir: Option<PathBuf>,
    /// Hold the reads to this many MB/s (simulated slow storage).
    #[arg(long, value_name = "MBPS")]
    pub read_throttle_mbps: Option<f64>,
    /// Stage batches in pageable memory instead of pinned.
    #[arg(long)]
    pub pageable: bool,
    /// Samples per step on each GPU [default: 256].
    #[arg(long, value_name = "N")]
    pub batch: Option<u32>,
    /// KiB read per sample [default: 112, a JPEG of ImageNet].
    #[arg(long, value_name = "KIB")]
    pub sample_kb: Option<u64>,
    /// KiB per transformed sample, copied to the GPU [default: 588, 3x224x224 float32].
    #[arg(long, value_name = "KIB")]
    pub tensor_kb: Option<u64>,
    /// Model width: each layer is WIDTH x WIDTH [default: 2048].
    #[arg(long, value_name = "N")]
    pub width: Option<u32>,
    /// Model layers [default: 16].
    #[arg(long, value_name = "N")]
    pub depth: Option<u32>,
    /// Columns (tokens) per sample [default: 128].
    #[arg(long, value_name = "N")]
    pub tokens: Option<u32>,
    /// Steps of the whole pipeline [default: as many as its share of --seconds allows].
    #[arg(long, value_name = "N")]
    pub steps: Option<u32>,
    /// CPU transform workers [default: the CPUs but two].
    #[arg(long, value_name = "N")]
    pub workers: Option<u32>,
    /// Reader threads [default: 4].
    #[arg(long, value_name = "N")]
    pub readers: Option<u32>,
    /// Rounds of the transform per input byte (its cost) [default: 4].
    #[arg(long, value_name = "N")]
    pub transform_cost: Option<u32>,
    /// The time budget, split across the stages [default: 40].
    #[arg(long, value_name = "SECS")]
    pub seconds: Option<u32>,
    /// MiB of the generated dataset [default: 256].
    #[arg(long, value_name = "MIB")]
    pub dataset_mb: Option<u64>,
    /// Also run ResNet-50 and BERT-base training steps through the installed PyTorch.
    #[arg(long)]
    pub torch: bool,
    #[command(flatten)]
    pub common: MeasureArgs,
}

/// The formats of the audit's report.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatArg {
    /// For a person at a terminal.
    #[value(alias = "text")]
    Table,
    /// gpuaudit.report/1, for scripts (`gpuaudit schema` prints its JSON Schema).
    Json,
    /// Markdown, for a ticket or an issue.
    #[value(alias = "markdown")]
    Md,
    /// One self-contained HTML page.
    Html,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Table => Format::Table,
            FormatArg::Json => Format::Json,
            FormatArg::Md => Format::Markdown,
            FormatArg::Html => Format::Html,
        }
    }
}

/// The formats of `bench`, `burn` and `models`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListFormat {
    /// For a person at a terminal.
    Table,
    /// For scripts.
    Json,
}

/// When the table is coloured.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ColorWhen {
    /// On a terminal, unless NO_COLOR is set.
    #[default]
    Auto,
    Always,
    Never,
}

/// Any string, with the values shell completion offers for it (clap_complete lists a
/// parser's possible values; `hide_possible_values` keeps the long lists out of `--help`).
/// The command judges what was given: `explain`'s did-you-mean, `--expect`'s list of the
/// names it knows. As a plain choice, clap would refuse a typo with its own message instead.
#[derive(Clone)]
pub struct Suggest(pub fn() -> Vec<String>);

impl TypedValueParser for Suggest {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new((self.0)().into_iter().map(PossibleValue::new)))
    }
}

/// `explain`'s completions: every check id.
fn check_ids() -> Vec<String> {
    gpuaudit_core::checks::all()
        .iter()
        .map(|c| c.id.to_string())
        .collect()
}

/// `--expect`'s completions: every name it accepts that a shell word can hold (a name with
/// a space, "h100 sxm5 80gb", has a hyphenated twin).
fn model_names() -> Vec<String> {
    let mut names: Vec<String> = gpuaudit_core::spec::SpecDb::embedded()
        .gpus
        .iter()
        .flat_map(|g| g.expect_names())
        .filter(|n| !n.contains(char::is_whitespace))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// `--profile`: the names and descriptions come from gpuaudit-core's `Profile`, the one list.
fn profile_parser() -> impl TypedValueParser<Value = Profile> {
    PossibleValuesParser::new(Profile::ALL.map(|p| PossibleValue::new(p.as_str()).help(p.about())))
        .try_map(|s| s.parse::<Profile>())
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Which measurements: context, pcie, memory, gemm, p2p, nccl, burn (or their check ids).
    /// None: all but the burn.
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,
    #[command(flatten)]
    pub common: MeasureArgs,
}

#[derive(Args, Debug)]
pub struct BurnArgs {
    /// How long, in seconds.
    #[arg(value_name = "SECS", default_value_t = 60)]
    pub seconds: u32,
    #[command(flatten)]
    pub common: MeasureArgs,
}

#[derive(Args, Debug, Clone)]
pub struct MeasureArgs {
    /// Only these GPU indices, e.g. 0,1 or 0-3.
    #[arg(long, value_name = "LIST")]
    pub gpus: Option<String>,
    /// Measure GPUs even when other processes use them.
    #[arg(long)]
    pub force: bool,
    /// Default: table (also when piped), or from the --output file's extension (.json).
    #[arg(long, value_enum, ignore_case = true)]
    pub format: Option<ListFormat>,
    /// Write the result to FILE instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug, Default, Clone)]
pub struct AuditArgs {
    /// Add the heavy measurements (GEMM per dtype, memory bandwidth, P2P matrix, NCCL sweep,
    /// 60 s burn, storage throughput).
    #[arg(long)]
    pub full: bool,
    /// Read the facts only: measure nothing.
    #[arg(long, conflicts_with = "full")]
    pub facts_only: bool,
    /// Audit a snapshot directory (written by `gpuaudit collect`) instead of this machine.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    #[command(flatten)]
    pub judge: JudgeArgs,
    /// Default: table (also when piped), or from the --output file's extension.
    #[arg(long, value_enum, ignore_case = true)]
    pub format: Option<FormatArg>,
    /// Write the report to FILE instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Measure GPUs even when other processes use them.
    #[arg(long)]
    pub force: bool,
    /// Replace hostnames, IP and MAC addresses, serials, UUIDs and user names with
    /// placeholders (host-1, GPU-00000000-0000-0000-ffff-000000000001, ...), so that the
    /// report can be shared in public; versions, bus ids, models and figures stay.
    #[arg(long)]
    pub redact: bool,
    /// List every finding and every measurement (by default: the problems, then one line per
    /// area).
    #[arg(long, short)]
    pub verbose: bool,
    /// Only the verdict and the problems.
    #[arg(long, short, conflicts_with = "verbose")]
    pub quiet: bool,
    #[arg(long, value_name = "WHEN", value_enum, default_value_t)]
    pub color: ColorWhen,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A report gpuaudit wrote as JSON (`--format json`, `--output FILE.json`).
    #[arg(value_name = "REPORT.json")]
    pub report: PathBuf,
    /// Default: table (also when piped), or from the --output file's extension.
    #[arg(long, value_enum, ignore_case = true)]
    pub format: Option<FormatArg>,
    /// Write the report to FILE instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace hostnames, IP and MAC addresses, serials, UUIDs and user names with
    /// placeholders (host-1, GPU-00000000-0000-0000-ffff-000000000001, ...), so that the
    /// report can be shared in public; versions, bus ids, models and figures stay.
    #[arg(long)]
    pub redact: bool,
    /// List every finding and every measurement (by default: the problems, then one line per
    /// area).
    #[arg(long, short)]
    pub verbose: bool,
    /// Only the verdict and the problems.
    #[arg(long, short, conflicts_with = "verbose")]
    pub quiet: bool,
    #[arg(long, value_name = "WHEN", value_enum, default_value_t)]
    pub color: ColorWhen,
}

/// The formats of `gpuaudit fleet`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FleetFormat {
    /// For a person at a terminal.
    #[value(alias = "text")]
    Table,
    /// gpuaudit.fleet/1, for scripts.
    Json,
    /// Markdown, for a ticket or an issue.
    #[value(alias = "markdown")]
    Md,
}

#[derive(Args, Debug)]
pub struct FleetArgs {
    /// Reports gpuaudit wrote as JSON (`--format json`), or directories: every *.json file in
    /// each (not its subdirectories), in name order.
    #[arg(value_name = "REPORT.json|DIR", required = true)]
    pub reports: Vec<PathBuf>,
    /// Default: table (also when piped), or from the --output file's extension (.json, .md).
    #[arg(long, value_enum, ignore_case = true)]
    pub format: Option<FleetFormat>,
    /// Write the summary to FILE instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[arg(long, value_name = "WHEN", value_enum, default_value_t)]
    pub color: ColorWhen,
    /// Flag a node this many percent or more worse than the median of its peers (and list
    /// the nodes this far below what their GPU model attains); nearer, a node far outside
    /// the fleet's noise is listed to watch. More than 0, less than 100.
    #[arg(long, value_name = "PCT", default_value = "10", value_parser = parse_threshold)]
    pub threshold: f64,
    /// What exits 1, for a Slurm prolog or a cluster's CI: `fail` (default) a node that
    /// failed a check or a file that is not a report; `slow` also a node flagged against its
    /// peers or below what its GPU model attains; `watch` also a node to watch.
    #[arg(long, value_name = "WHAT", value_enum, default_value_t = FleetFailOn::Fail)]
    pub fail_on: FleetFailOn,
}

/// `gpuaudit fleet --fail-on`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FleetFailOn {
    /// A node failed a check, or a file is not a report.
    Fail,
    /// Also a node flagged against its peers (slower, hotter, other power) or below what its
    /// GPU model attains.
    #[value(alias = "outlier")]
    Slow,
    /// Also a node to watch (within the threshold, far outside the noise).
    Watch,
}

/// `--threshold`: a percentage (`5`, `7.5`, `5%`) above 0 and below 100, as a share.
fn parse_threshold(s: &str) -> Result<f64, String> {
    let pct: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("'{s}' is not a percentage (such as 10 or 7.5)"))?;
    if !(pct > 0.0 && pct < 100.0) {
        return Err(format!(
            "{s}: a threshold is more than 0% and less than 100%"
        ));
    }
    Ok(pct / 100.0)
}

/// The formats of `gpuaudit compare`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareFormat {
    /// For a person at a terminal.
    #[value(alias = "text")]
    Table,
    /// Markdown, for a GitHub issue.
    #[value(alias = "markdown")]
    Md,
    /// One self-contained page with a chart per key figure.
    Html,
    /// gpuaudit.compare/1, for scripts.
    Json,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Reports gpuaudit wrote as JSON (`--format json`), two or more, one column each.
    #[arg(value_name = "REPORT.json", required = true, num_args = 2..)]
    pub reports: Vec<PathBuf>,
    /// The columns' names, in order: none, or one per report (default: the report's
    /// hostname, else the file's stem).
    #[arg(long = "name", value_name = "NAME")]
    pub names: Vec<String>,
    /// Default: table (also when piped), or from the --output file's extension (.md, .html,
    /// .json).
    #[arg(long, value_enum, ignore_case = true)]
    pub format: Option<CompareFormat>,
    /// Write the comparison to FILE instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace hostnames, IP and MAC addresses, serials, UUIDs and user names with
    /// placeholders, one mapping over every report (the same UUID in two reports is one
    /// placeholder), the file names too; versions, bus ids, models and figures stay.
    #[arg(long)]
    pub redact: bool,
    #[arg(long, value_name = "WHEN", value_enum, default_value_t)]
    pub color: ColorWhen,
}

#[derive(Args, Debug)]
pub struct CollectArgs {
    /// The snapshot directory to create (must not exist, or be empty).
    // `--output`, as every command names where it writes; `--out`, its first name, stays a
    // hidden alias so that scripts written for it keep working.
    #[arg(long = "output", short = 'o', alias = "out", value_name = "DIR")]
    pub out: PathBuf,
    /// A description stored in meta.json.
    #[arg(long)]
    pub description: Option<String>,
    /// Where datasets and models live (recorded for the storage checks); repeatable.
    #[arg(long = "data-dir", value_name = "PATH")]
    pub data_dirs: Vec<PathBuf>,
}

/// "0,1", "0-3", "0,2-3" -> sorted, deduplicated indices.
pub fn parse_gpu_list(s: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("--gpus '{s}': expected indices like 0,1 or 0-3");
        match part.split_once('-') {
            Some((a, b)) => {
                let a: u32 = a.trim().parse().map_err(|_| bad())?;
                let b: u32 = b.trim().parse().map_err(|_| bad())?;
                if a > b || b - a > 1024 {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err(format!("--gpus '{s}': name at least one GPU index"));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fleet_thresholds_are_percentages_between_0_and_100() {
        assert_eq!(parse_threshold("10").unwrap(), 0.1);
        assert_eq!(parse_threshold("5%").unwrap(), 0.05);
        assert_eq!(parse_threshold("7.5").unwrap(), 0.075);
        assert!(parse_threshold("99.9").is_ok());
        for bad in ["0", "100", "-5", "x", "nan", "inf", ""] {
            assert!(parse_threshold(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn gpu_lists() {
        assert_eq!(parse_gpu_list("0,1").unwrap(), vec![0, 1]);
        assert_eq!(parse_gpu_list("2-4,0").unwrap(), vec![0, 2, 3, 4]);
        assert!(parse_gpu_list("x").is_err());
        assert!(parse_gpu_list("3-1").is_err());
        assert!(parse_gpu_list("").is_err());
    }

    #[test]
    fn every_format_and_profile_is_a_choice_help_lists() {
        use clap::CommandFactory;
        let help = Cli::command().render_long_help().to_string();
        for p in Profile::ALL {
            // "- train:     multi-GPU training: ..." (aligned, maybe wrapped after).
            let start: String = p.about().chars().take(16).collect();
            assert!(
                help.lines()
                    .any(|l| l.contains(&format!("- {}:", p.as_str())) && l.contains(&start)),
                "{}: {help}",
                p.as_str()
            );
        }
        for f in ["table", "json", "md", "html"] {
            assert!(help.contains(&format!("- {f}:")), "{f}: {help}");
        }
        for w in ["auto", "always", "never"] {
            assert!(help.contains(&format!("- {w}")), "{w}: {help}");
        }
        // Every profile the core knows parses from its own name, any case.
        for p in Profile::ALL {
            for name in [p.as_str().to_string(), p.as_str().to_uppercase()] {
                let cli = Cli::try_parse_from(["gpuaudit", "--profile", &name]).unwrap();
                assert_eq!(cli.audit.judge.profile, p);
            }
        }
        let cli = Cli::try_parse_from(["gpuaudit", "--format", "markdown"]).unwrap();
        assert_eq!(cli.audit.format.map(Format::from), Some(Format::Markdown));
        assert!(Cli::try_parse_from(["gpuaudit", "--profile", "gaming"]).is_err());
    }

    #[test]
    fn serve_durations_and_default_address() {
        assert_eq!(
            parse_duration("60s"),
            Ok(std::time::Duration::from_secs(60))
        );
        assert_eq!(
            parse_duration("5m"),
            Ok(std::time::Duration::from_secs(300))
        );
        assert_eq!(parse_duration("1s"), Ok(std::time::Duration::from_secs(1)));
        assert!(parse_duration("999ms").is_err());
        assert!(parse_duration("soon").is_err());
        // A bare number: the suggestion is one that is accepted (not humantime's "5ms").
        let e = parse_interval("5").unwrap_err();
        assert_eq!(e, "'5': a duration needs its unit: 5s (seconds), 5m or 5h");
        assert_eq!(parse_interval("5s"), Ok(std::time::Duration::from_secs(5)));
        // Bounded: a day for the interval, 30 days for the measurements; beyond, an error
        // (exit 2 from clap), never an instant that overflows.
        assert_eq!(parse_interval("1d"), Ok(SERVE_MAX_INTERVAL));
        assert_eq!(
            parse_interval("24h 1s"),
            Err("'24h 1s': at most 1 day (24h)".into())
        );
        assert!(parse_interval("18446744073709551615s").is_err());
        assert_eq!(parse_measure_every("30d"), Ok(SERVE_MAX_MEASURE_EVERY));
        assert!(parse_measure_every("31d").is_err());
        assert!(parse_measure_every("18446744073709551615s").is_err());
        assert!(parse_interval("999ms").is_err());
        let cli = Cli::try_parse_from(["gpuaudit", "serve"]).unwrap();
        let Some(Command::Serve(s)) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(s.listen.port(), SERVE_DEFAULT_PORT);
        assert!(s.listen.ip().is_loopback());
        assert_eq!(s.interval, std::time::Duration::from_secs(60));
        assert_eq!(s.measure_every, None);
        // A snapshot has nothing to measure.
        assert!(
            Cli::try_parse_from(["gpuaudit", "serve", "--root", "x", "--measure-every", "1h"])
                .is_err()
        );
    }

    #[test]
    fn the_audits_options_before_audit_are_taken_as_after_it() {
        let audit = |args: &[&str]| match Cli::parse_from_args(args) {
            Ok(Cli {
                command: Some(Command::Audit(a)),
                ..
            }) => a,
            other => panic!("{args:?}: {other:?}"),
        };
        let a = audit(&["gpuaudit", "--root", "snap", "audit", "-q"]);
        assert_eq!(a.root.as_deref(), Some(std::path::Path::new("snap")));
        assert!(a.quiet);
        let a = audit(&["gpuaudit", "--data-dir", "/a", "audit", "--data-dir", "/b"]);
        assert_eq!(
            a.judge.data_dirs,
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
        let a = audit(&["gpuaudit", "--profile", "train", "-o", "r.json", "audit"]);
        assert_eq!(a.judge.profile, Profile::Train);
        assert_eq!(a.output.as_deref(), Some(std::path::Path::new("r.json")));
        // Conflicts across the two places, a repeat, another command: refused.
        assert!(Cli::parse_from_args(["gpuaudit", "--full", "audit", "--facts-only"]).is_err());
        assert!(Cli::parse_from_args(["gpuaudit", "--root", "a", "audit", "--root", "b"]).is_err());
        let e = Cli::parse_from_args(["gpuaudit", "--root", "x", "checks"]).unwrap_err();
        assert!(
            e.to_string()
                .contains("--root is the audit's, not `gpuaudit checks`'s"),
            "{e}"
        );
        // Every option of the audit given before `audit` arrives.
        use clap::{Args, CommandFactory};
        let ids: Vec<String> = AuditArgs::augment_args(clap::Command::new("x"))
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .collect();
        let full = Cli::command();
        for id in ids {
            let arg = full
                .get_arguments()
                .find(|a| a.get_id() == id.as_str())
                .unwrap();
            let long = format!("--{}", arg.get_long().unwrap());
            let mut args = vec!["gpuaudit".to_string(), long.clone()];
            if arg.get_action().takes_values() {
                args.push(match id.as_str() {
                    "profile" => "train".into(),
                    "format" => "json".into(),
                    "color" => "always".into(),
                    "concurrency" => "7".into(),
                    _ => "v".into(),
                });
            }
            let bare = Cli::parse_from_args(&args).unwrap().audit;
            args.push("audit".into());
            let a = audit(&args.iter().map(String::as_str).collect::<Vec<_>>());
            assert_eq!(format!("{a:?}"), format!("{bare:?}"), "{long}");
        }
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
