int dense_bench_main(int argc, char** argv);
int main(int argc, char** argv) { return dense_bench_main(argc, argv); }
