int prefill_bench_main(int argc, char** argv);
int main(int argc, char** argv) { return prefill_bench_main(argc, argv); }
