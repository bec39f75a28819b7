// The delivery path allocates per row and per request; glibc's malloc spent ~14 %
// of the samples of a delivery benchmark in its own bookkeeping; mimalloc cut the CPU
// per delivery by ~12 % (docs/BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    hookline::main()
}
