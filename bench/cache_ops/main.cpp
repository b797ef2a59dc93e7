int cache_ops_bench_main(int argc, char** argv);
int main(int argc, char** argv) { return cache_ops_bench_main(argc, argv); }
