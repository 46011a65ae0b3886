// Runs a fuzz target without libFuzzer, as an ordinary test: every file of the seed
// corpus, then deterministic mutations of each (byte flips, truncations, insertions).
// The coverage-guided run is tests/fuzz/run-libfuzzer; this keeps the target compiling
// and its seeds passing in every `bazel test`.
//
// Usage: <target> CORPUS_DIR [MUTATIONS_PER_SEED]
#include <dirent.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [MUTATIONS_PER_SEED]\n", argv[0]);
    return 2;
  }
  int mutations = argc > 2 ? std::atoi(argv[2]) : 2000;
  std::vector<std::string> seeds;
  if (DIR* dir = opendir(argv[1])) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] == '.') continue;
      std::ifstream in(std::string(argv[1]) + "/" + entry->d_name, std::ios::binary);
      std::stringstream bytes;
      bytes << in.rdbuf();
      seeds.push_back(bytes.str());
    }
    closedir(dir);
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "no seeds in %s\n", argv[1]);
    return 1;
  }
  std::mt19937 rng(12345);
  long runs = 0;
  for (const std::string& seed : seeds) {
    Run(seed);
    ++runs;
    for (int m = 0; m < mutations; ++m) {
      std::string input = seed;
      int edits = 1 + rng() % 4;
      for (int e = 0; e < edits; ++e) {
        switch (rng() % 4) {
          case 0:
            if (!input.empty()) input[rng() % input.size()] ^= static_cast<char>(1 + rng() % 255);
            break;
          case 1:
            if (!input.empty()) input.resize(rng() % input.size());
            break;
          case 2:
            input.insert(input.begin() + (input.empty() ? 0 : rng() % input.size()),
                         static_cast<char>(rng()));
            break;
          case 3:
            if (!input.empty()) input[rng() % input.size()] = static_cast<char>(rng() % 8);
            break;
        }
      }
      Run(input);
      ++runs;
    }
  }
  std::printf("%ld inputs from %zu seeds ran without a crash\n", runs, seeds.size());
  return 0;
}
