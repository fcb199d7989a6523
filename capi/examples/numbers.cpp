// numbers.cpp: the numbers model through the C++17 wrapper tessel.hpp.
//
//   numbers_cpp TSV [STRIDE]
//
// Shares one model between two sessions (a copy of tessel::Model is another reference), reads
// numbers, runs a beam search with a lambda as the step callback, catches a refusal as
// tessel::Error, and fails unless every STRIDE-th line of TSV (pytorch_greedy.tsv) that
// PyTorch decided by a margin above 1e-3 reads the same on both sessions.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "tessel.hpp"

int main(int argc, char **argv) {
    if (argc < 2) {
        std::cerr << "usage: " << argv[0] << " TSV [STRIDE]\n";
        return 2;
    }
    const long stride = argc > 2 ? std::max(1L, std::strtol(argv[2], nullptr, 10)) : 1;
    try {
        const tessel::Model model = tessel::Model::numbers();
        const tessel::Model shared = model;  // a second reference to the same model
        tessel_limits limits{};
        limits.max_beam = 2;
        tessel::Session first(model, &limits);
        tessel::Session second(shared, &limits);
        std::cout << "tessel " << tessel_version() << ", arena " << model.arena_bytes(&limits)
                  << " bytes per session\n";

        for (const char *text : {"ninety-nine thousand nine hundred ninety-nine", "seven"}) {
            std::cout << text << " -> " << first.read_numbers(text) << "\n";
        }

        // The last text is still encoded: beam search with a lambda callback.
        std::size_t steps = 0;
        tessel_generate_options options = tessel_generate_options_default();
        options.beam = 2;
        const std::size_t count = first.generate(options, [&](tessel_step &) { steps += 1; });
        const tessel::Hypothesis best = first.hypothesis(0);
        std::cout << count << " hypotheses in " << steps << " steps; the best has "
                  << best.tokens.size() << " tokens, score " << best.score << "\n";

        try {
            first.read_numbers("12 apples");
            std::cerr << "a text with digits was not refused\n";
            return 1;
        } catch (const tessel::Error &e) {
            std::cout << "refused as expected: " << e.what() << "\n";
        }

        std::ifstream tsv(argv[1]);
        if (!tsv) {
            std::cerr << "cannot open " << argv[1] << "\n";
            return 1;
        }
        std::string line;
        long index = 0;
        std::size_t read = 0, differ = 0;
        while (std::getline(tsv, line)) {
            if (index++ % stride != 0) {
                continue;
            }
            std::istringstream fields(line);
            std::string words, expected, margin;
            std::getline(fields, words, '\t');
            std::getline(fields, expected, '\t');
            std::getline(fields, margin, '\t');
            const std::string a = first.read_numbers(words);
            const std::string b = second.read_numbers(words);
            read += 1;
            if (a != b || (std::stod(margin) > 1e-3 && a != expected)) {
                std::cerr << "mismatch: \"" << words << "\" -> " << a << " / " << b
                          << ", PyTorch " << expected << "\n";
                differ += 1;
            }
        }
        std::cout << read << " lines read on two sessions, " << differ << " differ\n";
        return differ == 0 && read > 0 ? 0 : 1;
    } catch (const std::exception &e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
}
