//! The `klpsym` binary: parse arguments, call the library, render what comes back, exit with
//! the status the answer calls for. Nothing else lives here.

mod cli;
mod commands;
mod options;
mod output;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

fn main() -> ExitCode {
    klpsym::default_sigpipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Lookup(a) => commands::lookup::run(&a),
        Command::Sympos(a) => commands::sympos::run(&a),
        Command::Copies(a) => commands::copies::run(&a),
        Command::Drift(a) => commands::drift::run(&a),
        Command::Search(a) => commands::search::run(&a),
        Command::Addr(a) => commands::addr::run(&a),
        Command::Dump(a) => commands::dump::run(&a),
        Command::Info(a) => commands::info::run(&a),
        Command::Check(a) => commands::check::run(&a),
        Command::Convert(a) => commands::convert::run(&a),
        Command::Status(a) => commands::status::run(&a),
        Command::Cache(a) => commands::cache::run(&a),
        Command::Completions(a) => commands::completions::run(&a),
        Command::Man(a) => commands::completions::man(&a),
    };
    match result {
        // The library decided how the run ends (0, 1, or 2 when an input failed).
        Ok(outcome) => ExitCode::from(outcome.exit_code()),
        Err(e) => {
            output::print_error(&e);
            // A script reading --json's stdout gets JSON either way.
            if std::env::args_os().any(|a| a == "--json") {
                output::print_error_json(&e);
            }
            ExitCode::from(2)
        }
    }
}
