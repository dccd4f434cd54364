//! `klpsym completions` and `klpsym man`: the shell completions and the manual page, made from
//! the argument definitions themselves.

use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use klpsym::Outcome;

use crate::output::{stdout, CliError};

pub fn run(args: &CompletionsArgs) -> Result<Outcome, CliError> {
    let mut cmd = Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "klpsym", &mut stdout());
    Ok(Outcome::Ok)
}

pub fn man(args: &ManArgs) -> Result<Outcome, CliError> {
    let mut cmd = Cli::command();
    // Built as the main page sees it: clap's own `help` verb among the verbs, so every page
    // the main page's SEE ALSO names is written.
    cmd.build();
    match &args.dir {
        None => clap_mangen::Man::new(cmd).render(&mut stdout())?,
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            klpsym::write_atomically(&dir.join("klpsym.1"), |f| {
                clap_mangen::Man::new(cmd.clone()).render(f)
            })?;
            for sub in cmd.get_subcommands() {
                // Named as man(1) finds it (klpsym-check), used as typed (klpsym check): the
                // NAME section reads the display name, SYNOPSIS the binary name.
                let name = format!("klpsym-{}", sub.get_name());
                let page = sub
                    .clone()
                    .display_name(name.clone())
                    .bin_name(format!("klpsym {}", sub.get_name()));
                klpsym::write_atomically(&dir.join(format!("{name}.1")), |f| {
                    clap_mangen::Man::new(page.clone())
                        .title(name.clone())
                        .render(f)
                })?;
            }
        }
    }
    Ok(Outcome::Ok)
}
