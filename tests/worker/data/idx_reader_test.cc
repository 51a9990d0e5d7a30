#include "worker/data/idx_reader.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "worker/data/dataset.h"

namespace sieve {
namespace {

namespace fs = std::filesystem;

void PutBigEndian32(std::vector<uint8_t>* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<uint8_t>(v >> shift));
}

std::vector<uint8_t> ImagesFile(uint32_t count, uint32_t rows, uint32_t cols,
                                uint32_t magic = kIdxImagesMagic) {
  std::vector<uint8_t> f;
  PutBigEndian32(&f, magic);
  PutBigEndian32(&f, count);
  PutBigEndian32(&f, rows);
  PutBigEndian32(&f, cols);
  for (uint32_t i = 0; i < count * rows * cols; ++i) f.push_back(static_cast<uint8_t>(i * 37));
  return f;
}

std::vector<uint8_t> LabelsFile(const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> f;
  PutBigEndian32(&f, kIdxLabelsMagic);
  PutBigEndian32(&f, static_cast<uint32_t>(labels.size()));
  f.insert(f.end(), labels.begin(), labels.end());
  return f;
}

class WorkerDataIdx : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sieve_idx_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string WriteGz(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = (dir_ / name).string();
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    EXPECT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    gzclose(f);
    return path;
  }

  std::string WritePlain(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  fs::path dir_;
};

TEST_F(WorkerDataIdx, LoadsAndNormalizes) {
  const std::string images = WriteGz("img.gz", ImagesFile(3, 4, 5));
  const std::string labels = WriteGz("lab.gz", LabelsFile({0, 9, 4}));
  StatusOr<Dataset> d = LoadDataset(images, labels);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->n, 3);
  EXPECT_EQ(d->rows, 4);
  EXPECT_EQ(d->cols, 5);
  EXPECT_EQ(d->example_size(), 20);
  ASSERT_EQ(d->images.size(), 60u);
  EXPECT_EQ(d->labels, (std::vector<uint8_t>{0, 9, 4}));
  for (int i = 0; i < 60; ++i) {
    const float pixel = static_cast<uint8_t>(i * 37);
    EXPECT_NEAR(d->images[i], (pixel / 255.0f - 0.2860f) / 0.3530f, 1e-5f) << i;
  }
  EXPECT_EQ(d->image(2), d->images.data() + 40);
}

TEST_F(WorkerDataIdx, ReadsUncompressedFilesToo) {
  StatusOr<IdxImages> im = ReadIdxImages(WritePlain("img", ImagesFile(2, 3, 3)));
  ASSERT_TRUE(im.ok()) << im.status().ToString();
  EXPECT_EQ(im->count, 2);
  EXPECT_EQ(im->pixels.size(), 18u);
}

TEST_F(WorkerDataIdx, MissingFileIsNotFound) {
  const std::string labels = WriteGz("lab.gz", LabelsFile({1}));
  StatusOr<Dataset> d = LoadDataset((dir_ / "absent.gz").string(), labels);
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find("absent.gz"), std::string::npos);
}

TEST_F(WorkerDataIdx, TruncatedDataIsDataLoss) {
  std::vector<uint8_t> bytes = ImagesFile(5, 4, 4);
  bytes.resize(bytes.size() - 16);  // header still says 5 images
  StatusOr<IdxImages> im = ReadIdxImages(WriteGz("img.gz", bytes));
  EXPECT_EQ(im.status().code(), StatusCode::kDataLoss) << im.status().ToString();
  // A header cut in the middle.
  StatusOr<IdxImages> head = ReadIdxImages(WriteGz("head.gz", {0, 0, 8, 3, 0, 0}));
  EXPECT_EQ(head.status().code(), StatusCode::kDataLoss) << head.status().ToString();
  // An empty file.
  EXPECT_EQ(ReadIdxLabels(WritePlain("empty", {})).status().code(), StatusCode::kDataLoss);
}

TEST_F(WorkerDataIdx, TruncatedGzipStreamIsDataLoss) {
  const std::string path = WriteGz("img.gz", ImagesFile(50, 28, 28));
  const auto size = fs::file_size(path);
  fs::resize_file(path, size / 2);
  StatusOr<IdxImages> im = ReadIdxImages(path);
  EXPECT_EQ(im.status().code(), StatusCode::kDataLoss) << im.status().ToString();
}

TEST_F(WorkerDataIdx, WrongMagicIsInvalidArgument) {
  const std::string labels = WriteGz("lab.gz", LabelsFile({1, 2}));
  // A labels file given as images.
  StatusOr<IdxImages> im = ReadIdxImages(labels);
  EXPECT_EQ(im.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(im.status().message().find("magic"), std::string::npos) << im.status().ToString();
  StatusOr<std::vector<uint8_t>> lab =
      ReadIdxLabels(WriteGz("img.gz", ImagesFile(1, 2, 2, 0x00000802)));
  EXPECT_EQ(lab.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(WorkerDataIdx, TrailingBytesAreInvalidArgument) {
  std::vector<uint8_t> bytes = LabelsFile({1, 2, 3});
  bytes.push_back(7);
  EXPECT_EQ(ReadIdxLabels(WriteGz("lab.gz", bytes)).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(WorkerDataIdx, CountMismatchIsInvalidArgument) {
  const std::string images = WriteGz("img.gz", ImagesFile(3, 2, 2));
  const std::string labels = WriteGz("lab.gz", LabelsFile({1, 2}));
  StatusOr<Dataset> d = LoadDataset(images, labels);
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("mismatch"), std::string::npos) << d.status().ToString();
}

TEST_F(WorkerDataIdx, LabelOutOfRangeIsInvalidArgument) {
  const std::string images = WriteGz("img.gz", ImagesFile(3, 2, 2));
  const std::string labels = WriteGz("lab.gz", LabelsFile({1, 10, 2}));
  StatusOr<Dataset> d = LoadDataset(images, labels);
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("label 10"), std::string::npos) << d.status().ToString();
}

TEST_F(WorkerDataIdx, BadSplitName) {
  EXPECT_EQ(LoadFashionMnist("test").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadFashionMnist("train", dir_.string()).status().code(), StatusCode::kNotFound);
}

TEST(WorkerDataFashionMnist, ReadsInstalledFiles) {
  if (!fs::exists(std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  for (const auto& [split, n] : {std::pair<const char*, int64_t>{"train", 60000},
                                 std::pair<const char*, int64_t>{"t10k", 10000}}) {
    StatusOr<Dataset> d = LoadFashionMnist(split);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->n, n);
    EXPECT_EQ(d->rows, 28);
    EXPECT_EQ(d->cols, 28);
    ASSERT_EQ(d->images.size(), static_cast<size_t>(n) * 784);
    std::array<int64_t, 10> per_class{};
    for (uint8_t l : d->labels) {
      ASSERT_LE(l, 9);
      ++per_class[l];
    }
    for (int64_t c : per_class) EXPECT_EQ(c, n / 10) << split;  // the classes are balanced
    double sum = 0;
    for (float v : d->images) sum += v;
    EXPECT_NEAR(sum / static_cast<double>(d->images.size()), 0.0, 0.02) << split;
  }
}

}  // namespace
}  // namespace sieve
