int decode_bench_main(int argc, char** argv);
int main(int argc, char** argv) { return decode_bench_main(argc, argv); }
