// gantry-tokenizer: serves tokenize / detokenize / render / count for several models.
//   gantry-tokenizer --listen tcp://127.0.0.1:5556 --model NAME=DIR [--model NAME=DIR ...]
// DIR is a bundle directory (verified at start) or a tokenizer directory.
#include <csignal>
#include <cstdio>
#include <map>
#include <string>

#include "common/log.h"
#include "tokenizer-svc/service/tokenizer_service.h"

namespace {
gantry::tokenizer_service::TokenizerService* g_service = nullptr;
void OnSignal(int) {
  if (g_service) g_service->Stop();
}
}  // namespace

int main(int argc, char** argv) {
  gantry::InitLogging("tokenizer");
  std::string listen = "tcp://127.0.0.1:5556";
  std::map<std::string, gantry::tokenizer_service::ServedModel> models;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--listen") {
      listen = value;
    } else if (flag == "--model" && value.find('=') != std::string::npos) {
      const std::string name = value.substr(0, value.find('='));
      auto model = gantry::tokenizer_service::LoadServedModel(value.substr(value.find('=') + 1));
      if (!model.ok()) {
        std::fprintf(stderr, "gantry-tokenizer: %s: %s\n", name.c_str(), model.status().ToString().c_str());
        return 1;
      }
      models.emplace(name, std::move(*model));
    } else {
      std::fprintf(stderr, "usage: gantry-tokenizer --listen ENDPOINT --model NAME=DIR ...\n");
      return 2;
    }
  }
  if (models.empty() || argc % 2 == 0) {
    std::fprintf(stderr, "usage: gantry-tokenizer --listen ENDPOINT --model NAME=DIR ...\n");
    return 2;
  }
  gantry::tokenizer_service::TokenizerService service(std::move(models));
  g_service = &service;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  absl::Status served = service.Serve(listen);
  if (!served.ok()) {
    std::fprintf(stderr, "gantry-tokenizer: %s\n", served.ToString().c_str());
    return 1;
  }
  return 0;
}
