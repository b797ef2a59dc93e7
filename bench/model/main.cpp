int model_bench_main(int argc, char** argv);
int main(int argc, char** argv) { return model_bench_main(argc, argv); }
