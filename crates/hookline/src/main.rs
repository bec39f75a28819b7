use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    hookline::main_with(hookline::Cli::parse()).await
}
