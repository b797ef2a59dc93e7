int wgmma_bench_main(int argc, char** argv);
int main(int argc, char** argv) { return wgmma_bench_main(argc, argv); }
