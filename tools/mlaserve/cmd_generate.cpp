// mlaserve generate: run prompts given as token ids and print the generated ids, one line per prompt.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <sstream>

#include "commands.h"
#include "engine_setup.h"

namespace mla::cli {

namespace {
Status parse_ids(const std::string& s, std::vector<int32_t>* out) {
  std::stringstream ss(s);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    try {
      out->push_back(static_cast<int32_t>(std::stol(tok)));
    } catch (...) {
      return Status::invalid("--prompt-token-ids", "not a token id: '" + tok + "' in '" + s + "'");
    }
  }
  if (out->empty()) return Status::invalid("--prompt-token-ids", "empty prompt");
  return Status::ok();
}
}  // namespace

void add_generate(CLI::App& root, std::function<int()>* run) {
  struct Opts {
    EngineOptions engine;
    std::vector<std::string> prompts;
    engine::SamplingParams params;
    bool ignore_eos = false;
  };
  auto o = std::make_shared<Opts>();
  o->params.temperature = 0.f;
  CLI::App* app = root.add_subcommand("generate", "generate from prompts given as token ids");
  add_engine_options(*app, &o->engine);
  app->add_option("--prompt-token-ids", o->prompts, "comma-separated ids; repeat for more prompts")->required();
  app->add_option("--max-tokens", o->params.max_tokens, "tokens to generate")->capture_default_str();
  app->add_option("--temperature", o->params.temperature, "0 = greedy")->capture_default_str();
  app->add_option("--top-k", o->params.top_k, "0 = off")->capture_default_str();
  app->add_option("--top-p", o->params.top_p, "1 = off")->capture_default_str();
  app->add_flag("--ignore-eos", o->ignore_eos, "keep generating past EOS");
  app->callback([o, run] {
    *run = [o]() -> int {
      std::vector<engine::Request> reqs;
      for (const auto& p : o->prompts) {
        engine::Request r;
        if (Status s = parse_ids(p, &r.prompt_token_ids); !s.is_ok()) return report(s);
        r.params = o->params;
        r.params.ignore_eos = o->ignore_eos;
        reqs.push_back(std::move(r));
      }
      EngineHandle h;
      if (Status s = build_engine(o->engine, &h); !s.is_ok()) return report(s);
      std::vector<engine::RequestOutput> outs;
      if (Status s = h.engine->generate(reqs, &outs); !s.is_ok()) return report(s);
      for (const auto& r : outs) {
        for (size_t i = 0; i < r.output_token_ids.size(); ++i) std::printf(i ? ",%d" : "%d", r.output_token_ids[i]);
        std::printf("\n");
      }
      return 0;
    };
  });
}

}  // namespace mla::cli
