int stream_bench_main(int argc, char** argv);
int main(int argc, char** argv) { return stream_bench_main(argc, argv); }
