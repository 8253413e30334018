// A word count over std::map<std::string, long>, as C++ is usually written: the map's
// operator[] and lower_bound are templates the compiler inlines into count_words (at -O2
// neither has a symbol of its own), so only DWARF's inlined subroutines name them; string
// comparison goes out to the C library's memcmp.
//   main -> make_words, count_words -> (inlined) std::map::operator[] -> (inlined)
//           std::map::lower_bound -> ... -> memcmp
// argv[1]: rounds. Prints the checksum.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

// Words of 1 to 12 letters of a 6-letter alphabet: many keys with long shared prefixes.
static std::vector<std::string> make_words(int n) {
    std::vector<std::string> w;
    unsigned x = 12345;
    for (int i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        std::string s;
        for (unsigned k = 0, len = 1 + (x >> 16) % 12; k < len; k++) {
            x = x * 1103515245u + 12345u;
            s += static_cast<char>('a' + (x >> 16) % 6);
        }
        w.push_back(s);
    }
    return w;
}

__attribute__((noinline)) long count_words(const std::vector<std::string> &words, int rounds) {
    std::map<std::string, long> counts;
    for (int r = 0; r < rounds; r++)
        for (const std::string &w : words) counts[w]++;
    long sum = 0;
    for (const auto &kv : counts) sum += kv.second * static_cast<long>(kv.first.size());
    return sum;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? std::atoi(argv[1]) : 40;
    std::vector<std::string> words = make_words(20000);
    std::printf("%ld\n", count_words(words, rounds));
    return 0;
}
