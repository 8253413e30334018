// C++ as it is usually written: templates (one function, two instantiations), the standard
// library's inlined templates (std::sort with a lambda, std::unordered_map), virtual calls,
// and exceptions thrown and caught (the unwinder in libgcc_s and libstdc++ at work).
//   main -> sum_squares<long>, sum_squares<double>   (templates, each its own symbol)
//        -> sort_words -> std::sort's helpers (inlined and not)
//        -> count_keys -> std::unordered_map
//        -> total_area -> Circle::area, Square::area (virtual)
//        -> parse_all -> parse_number, which throws for bad input; parse_all catches
// Each timed function adds its CPU time (callees included) to its counter.
// argv[1]: rounds. Prints "split total T name t ...".
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>
extern "C" {
#include "clock.h"
}

#define NOINLINE __attribute__((noinline))

static double t_sum_long, t_sum_double, t_sort, t_count, t_area, t_parse;
static volatile double sink;

// A small timer: adds the CPU time from its construction to its destruction (inlined).
struct Timed {
    double &slot, t0;
    explicit Timed(double &s) : slot(s), t0(PROCESS_NOW()) {}
    ~Timed() { slot += PROCESS_NOW() - t0; }
};

template <typename T> NOINLINE T sum_squares(const std::vector<T> &v, double &slot) {
    Timed t(slot);
    T s = 0;
    for (int pass = 0; pass < 64; pass++)
        for (const T &x : v) s += x * x / (pass + 1);
    return s;
}

NOINLINE size_t sort_words(std::vector<std::string> words) {
    Timed t(t_sort);
    std::sort(words.begin(), words.end(), [](const std::string &a, const std::string &b) {
        return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
    return words.front().size() + words.back().size();
}

NOINLINE size_t count_keys(const std::vector<std::string> &words) {
    Timed t(t_count);
    std::unordered_map<std::string, int> counts;
    for (const auto &w : words) counts[w]++;
    return counts.size();
}

struct Shape {
    virtual ~Shape() = default;
    virtual double area() const = 0;
};
struct Circle : Shape {
    double r;
    explicit Circle(double r) : r(r) {}
    double area() const override { return 3.14159265358979 * r * r; }
};
struct Square : Shape {
    double s;
    explicit Square(double s) : s(s) {}
    double area() const override { return s * s; }
};

NOINLINE double total_area(const std::vector<std::unique_ptr<Shape>> &shapes) {
    Timed t(t_area);
    double a = 0;
    for (int pass = 0; pass < 20; pass++)
        for (const auto &s : shapes) a += s->area();
    return a;
}

NOINLINE long parse_number(const std::string &s) {
    long v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') throw std::invalid_argument("not a number: " + s);
        v = v * 10 + (c - '0');
    }
    return v;
}

NOINLINE long parse_all(const std::vector<std::string> &fields) {
    Timed t(t_parse);
    long sum = 0, bad = 0;
    for (const auto &f : fields) {
        try {
            sum += parse_number(f);
        } catch (const std::invalid_argument &) {
            bad++;
        }
    }
    return sum + bad;
}

int main(int argc, char **argv) {
    double start = PROCESS_NOW();
    int rounds = argc > 1 ? std::atoi(argv[1]) : 10;
    std::vector<long> longs(20000);
    std::vector<double> doubles(20000);
    std::vector<std::string> words, fields;
    std::vector<std::unique_ptr<Shape>> shapes;
    unsigned x = 1;
    for (size_t i = 0; i < 20000; i++) {
        x = x * 1103515245u + 12345u;
        longs[i] = x >> 8;
        doubles[i] = (x >> 8) / 3.0;
        words.push_back("w" + std::to_string(x % 5000));
        fields.push_back(i % 8 == 0 ? "x" + std::to_string(i) : std::to_string(x % 100000));
        if (i % 2) shapes.push_back(std::make_unique<Circle>(i % 7));
        else shapes.push_back(std::make_unique<Square>(i % 5));
    }
    double s = 0;
    for (int r = 0; r < rounds; r++) {
        s += sum_squares(longs, t_sum_long);
        s += sum_squares(doubles, t_sum_double);
        s += sort_words(words);
        s += count_keys(words);
        s += total_area(shapes);
        s += parse_all(fields);
    }
    sink = s;
    std::printf("split total %.6f sum_squares<long> %.6f sum_squares<double> %.6f sort_words %.6f "
                "count_keys %.6f total_area %.6f parse_all %.6f\n",
                PROCESS_NOW() - start, t_sum_long, t_sum_double, t_sort, t_count, t_area, t_parse);
    return 0;
}
