// tasks.cpp: translation and transcription through the C++17 wrapper tessel.hpp.
//
//   tasks_cpp TRANSLATION_DIR SOURCE_LANG TARGET_LANG TEXT WHISPER_DIR WAV
//
// Translates TEXT with tessel::Translator (a second time from the kept result: the same
// text), transcribes WAV with tessel::Transcriber by path, and fails unless the translation
// is not empty when the text is not, the two translations agree and the transcript has
// segments in time order.
#include <iostream>
#include <string>
#include <vector>

#include "tessel.hpp"

int main(int argc, char **argv) {
    if (argc < 7) {
        std::cerr << "usage: " << argv[0]
                  << " TRANSLATION_DIR SOURCE_LANG TARGET_LANG TEXT WHISPER_DIR WAV\n";
        return 2;
    }
    try {
        tessel_translate_options options = tessel_translate_options_default();
        options.source_lang = argv[2];
        options.target_lang = argv[3];
        tessel::Translator translator(argv[1], &options);
        const std::string first = translator.translate(argv[4]);
        const std::string again = translator.translate(argv[4]);
        std::cout << argv[4] << "\n-> " << first << "\n";

        tessel::Transcriber transcriber(argv[5], 1);
        tessel_transcribe_options greedy = tessel_transcribe_options_default();
        greedy.beam = 1;
        const std::vector<tessel::Segment> segments = transcriber.transcribe_wav(argv[6], &greedy);
        bool ordered = !segments.empty();
        double last = 0.0;
        for (const tessel::Segment &s : segments) {
            std::cout << "[" << s.start << " -> " << s.end << "] " << s.text.size()
                      << " bytes of text\n";
            ordered = ordered && s.start >= last && s.end >= s.start;
            last = s.start;
        }
        // A refusal becomes tessel::Error.
        try {
            tessel::Transcriber("/nonexistent", 1);
            return 1;
        } catch (const tessel::Error &e) {
            std::cout << "refused as expected: " << e.what() << "\n";
        }
        const bool ok = first == again && (first.size() > 0 || std::string(argv[4]).empty()) &&
                        ordered;
        return ok ? 0 : 1;
    } catch (const tessel::Error &e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
}
