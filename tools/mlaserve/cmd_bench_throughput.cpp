// mlaserve bench throughput: offline throughput, counted as `vllm bench throughput` counts it: random
// prompts of exactly --input-len tokens, EOS ignored so every request emits --output-len tokens, the
// timer around generation only; prints "Throughput: X requests/s, Y total tokens/s, Z output tokens/s".
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

#include "commands.h"
#include "engine_setup.h"
#include "progress_line.h"

namespace mla::cli {

void add_bench_throughput(CLI::App& bench, std::function<int()>* run) {
  struct Opts {
    EngineOptions engine;
    std::string dataset = "random";
    int input_len = 1024, output_len = 128, num_prompts = 1000;
    std::string output_json;
    double stats_interval = 0;
    double time_limit = 0;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* app = bench.add_subcommand("throughput", "offline throughput (vLLM's bench throughput)");
  add_engine_options(*app, &o->engine);
  app->add_option("--dataset-name", o->dataset, "random")->capture_default_str();
  app->add_option("--input-len", o->input_len, "prompt tokens per request")->capture_default_str();
  app->add_option("--output-len", o->output_len, "generated tokens per request")->capture_default_str();
  app->add_option("--num-prompts", o->num_prompts, "requests")->capture_default_str();
  app->add_option("--output-json", o->output_json, "also write the results as JSON");
  app->add_option(
         "--stats-interval", o->stats_interval,
         "also print the step summary (steps by kind, ms) to stderr every this many seconds (0: at the end only)")
      ->capture_default_str();
  app->add_option("--time-limit", o->time_limit,
                  "stop generating after this many seconds and print the step summary instead of a throughput (a "
                  "proxy for runs too long to finish; 0: no limit)")
      ->capture_default_str();
  app->callback([o, run] {
    *run = [o]() -> int {
      if (o->dataset != "random") {
        std::fprintf(stderr, "mlaserve: --dataset-name %s: only 'random' is supported\n", o->dataset.c_str());
        return 2;
      }
      if (o->input_len < 1 || o->output_len < 1 || o->num_prompts < 1) {
        std::fprintf(stderr, "mlaserve: --input-len, --output-len and --num-prompts must be >= 1\n");
        return 2;
      }
      EngineHandle h;
      if (Status s = build_engine(o->engine, &h); !s.is_ok()) return report(s);
      // Random prompts (uniform token ids), fixed lengths, EOS ignored: vLLM's random dataset at range ratio 0.
      std::mt19937_64 rng(o->engine.source.seed);
      std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(h.vocab_size - 1));
      std::vector<engine::Request> reqs(static_cast<size_t>(o->num_prompts));
      for (auto& r : reqs) {
        r.prompt_token_ids.resize(static_cast<size_t>(o->input_len));
        for (auto& t : r.prompt_token_ids) t = tok(rng);
        r.params.temperature = 1.0f;
        r.params.top_p = 1.0f;
        r.params.max_tokens = o->output_len;
        r.params.ignore_eos = true;
      }
      const auto t0 = std::chrono::steady_clock::now();
      for (const auto& r : reqs) {
        engine::SeqId id;
        if (Status s = h.engine->add_request(r, &id); !s.is_ok()) return report(s);
      }
      ProgressLine bar("generate", o->num_prompts);
      int64_t done = 0, out_tokens = 0;
      std::vector<engine::RequestOutput> finished;
      double next_stats = o->stats_interval;
      while (h.engine->has_unfinished()) {
        if (o->time_limit > 0 &&
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= o->time_limit)
          break;
        finished.clear();
        if (Status s = h.engine->step(&finished); !s.is_ok()) return report(s);
        for (const auto& f : finished) out_tokens += static_cast<int64_t>(f.output_token_ids.size());
        done += static_cast<int64_t>(finished.size());
        const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        bar.update(done, el > 0 ? double(out_tokens) / el : 0.0);
        if (o->stats_interval > 0 && el >= next_stats) {
          // For runs cut short by a time limit: where the time went so far.
          next_stats = el + o->stats_interval;
          std::fprintf(stderr, "\n[%.1f s] %lld/%d requests done, %lld output tokens\n%s%s", el, (long long)done,
                       o->num_prompts, (long long)out_tokens, engine::format_step_stats(h.engine->stats()).c_str(),
                       h.runner_summary ? h.runner_summary().c_str() : "");
        }
      }
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      bar.finish(done, double(out_tokens) / elapsed);
      if (h.engine->has_unfinished()) {
        // --time-limit: not a throughput (the unfinished requests would count), only where the time went.
        std::printf("Stopped at --time-limit after %.2f s: %lld of %d requests done, %lld output tokens of finished "
                    "requests, %lld decode tokens in all\n",
                    elapsed, (long long)done, o->num_prompts, (long long)out_tokens,
                    (long long)h.engine->stats().num_decode_tokens);
        std::printf("\nSteps (wall ms from schedule to tokens back):\n%s%s",
                    engine::format_step_stats(h.engine->stats()).c_str(),
                    h.runner_summary ? h.runner_summary().c_str() : "");
        return 0;
      }
      const int64_t prompt_tokens = int64_t(o->num_prompts) * o->input_len;
      const int64_t total = prompt_tokens + out_tokens;
      std::printf("Throughput: %.2f requests/s, %.2f total tokens/s, %.2f output tokens/s\n", o->num_prompts / elapsed,
                  total / elapsed, out_tokens / elapsed);
      std::printf("Total num prompt tokens:  %lld\nTotal num output tokens:  %lld\n", (long long)prompt_tokens,
                  (long long)out_tokens);
      std::printf("\nSteps (wall ms from schedule to tokens back):\n%s%s",
                  engine::format_step_stats(h.engine->stats()).c_str(),
                  h.runner_summary ? h.runner_summary().c_str() : "");
      if (!o->output_json.empty()) {
        std::ofstream js(o->output_json);
        js << "{\"elapsed_time\": " << elapsed << ", \"num_requests\": " << o->num_prompts
           << ", \"total_num_tokens\": " << total << ", \"requests_per_second\": " << o->num_prompts / elapsed
           << ", \"tokens_per_second\": " << total / elapsed
           << ", \"output_tokens_per_second\": " << out_tokens / elapsed << "}\n";
        if (!js) {
          std::fprintf(stderr, "mlaserve: cannot write %s\n", o->output_json.c_str());
          return 1;
        }
      }
      return 0;
    };
  });
}

}  // namespace mla::cli
