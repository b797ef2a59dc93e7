int moe_bench_main(int argc, char** argv);
int main(int argc, char** argv) { return moe_bench_main(argc, argv); }
