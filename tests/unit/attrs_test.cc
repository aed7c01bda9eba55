// fattr4 encoding/decoding of Attrs (upstream/attrs.h), against attrlists
// built by hand here so the decoder is not only checked against itself.
#include "upstream/attrs.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_idmap.h"
#include "upstream/idmap.h"
#include "upstream/owners.h"

namespace nache {
namespace upstream {
namespace {

// Builds an attrlist and its bitmap the long way, one attribute at a time.
class AttrlistBuilder {
 public:
  AttrlistBuilder &Bit(uint32_t n) {
    if (bitmap_.size() <= n / 32) bitmap_.resize(n / 32 + 1, 0);
    bitmap_[n / 32] |= 1u << (n % 32);
    return *this;
  }
  AttrlistBuilder &U32(uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) bytes_.push_back(char(v >> s));
    return *this;
  }
  AttrlistBuilder &U64(uint64_t v) {
    return U32(uint32_t(v >> 32)).U32(uint32_t(v));
  }
  AttrlistBuilder &Opaque(const std::string &s) {
    U32(uint32_t(s.size()));
    bytes_ += s;
    bytes_.append((4 - s.size() % 4) % 4, '\0');
    return *this;
  }
  bool Decode(Attrs *a, Fh *fh = nullptr, OwnerCodec *owners = nullptr) const {
    return DecodeAttrs(bitmap_.data(), bitmap_.size(), bytes_.data(),
                       bytes_.size(), a, fh, owners);
  }
  std::string &bytes() { return bytes_; }

 private:
  std::vector<uint32_t> bitmap_;
  std::string bytes_;
};

TEST(AttrsTest, DecodesEveryAttributeWeKeep) {
  AttrlistBuilder b;
  // Values in ascending fattr4 bit order, as the protocol requires.
  b.Bit(0)
      .U32(2)
      .U32((1u << 1) | (1u << 4))
      .U32(1u << (33 - 32));            // supported: type, size, mode
  b.Bit(1).U32(2);                      // type: dir
  b.Bit(3).U64(0x1122334455667788ull);  // change
  b.Bit(4).U64(4096);                   // size
  b.Bit(8).U64(7).U64(9);               // fsid
  b.Bit(10).U32(45);                    // lease_time
  b.Bit(11).U32(0);                     // rdattr_error
  b.Bit(19).Opaque(std::string("\x01\x02\x03", 3));   // filehandle
  b.Bit(20).U64(123456);                              // fileid
  b.Bit(21).U64(11).Bit(22).U64(12).Bit(23).U64(13);  // files_*
  b.Bit(27).U64(1ull << 40);                          // maxfilesize
  b.Bit(28).U32(255).Bit(29).U32(254);                // maxlink, maxname
  b.Bit(30).U64(1 << 20).Bit(31).U64(1 << 19);        // maxread, maxwrite
  b.Bit(33).U32(0100755);               // mode (type bits dropped)
  b.Bit(35).U32(3);                     // numlinks
  b.Bit(36).Opaque("1000");             // owner
  b.Bit(37).Opaque("100@example.org");  // owner_group
  b.Bit(41).U32(8).U32(1);              // rawdev
  b.Bit(42).U64(21).Bit(43).U64(22).Bit(44).U64(23);  // space_*
  b.Bit(45).U64(8192);                                // space_used
  b.Bit(47).U64(100).U32(1);                          // time_access
  b.Bit(52).U64(300).U32(3);                          // time_metadata
  b.Bit(53).U64(200).U32(2);                          // time_modify
  b.Bit(55).U64(77);                                  // mounted_on_fileid

  Attrs a;
  Fh fh;
  ASSERT_TRUE(b.Decode(&a, &fh));
  EXPECT_EQ(a.supported, uint64_t(kAttrType | kAttrSize | kAttrMode));
  EXPECT_EQ(a.type, FileType::kDir);
  EXPECT_EQ(a.change, 0x1122334455667788ull);
  EXPECT_EQ(a.size, 4096u);
  EXPECT_EQ(a.fsid_major, 7u);
  EXPECT_EQ(a.fsid_minor, 9u);
  EXPECT_EQ(a.lease_time, 45u);
  EXPECT_EQ(a.rdattr_error, 0u);
  EXPECT_EQ(fh, std::string("\x01\x02\x03", 3));
  EXPECT_EQ(a.fileid, 123456u);
  EXPECT_EQ(a.files_avail, 11u);
  EXPECT_EQ(a.files_free, 12u);
  EXPECT_EQ(a.files_total, 13u);
  EXPECT_EQ(a.maxfilesize, 1ull << 40);
  EXPECT_EQ(a.maxlink, 255u);
  EXPECT_EQ(a.maxname, 254u);
  EXPECT_EQ(a.maxread, 1u << 20);
  EXPECT_EQ(a.maxwrite, 1u << 19);
  EXPECT_EQ(a.mode, 0755u);
  EXPECT_EQ(a.nlink, 3u);
  EXPECT_EQ(a.uid, 1000u);
  EXPECT_EQ(a.gid, 100u);
  EXPECT_EQ(a.rdev_major, 8u);
  EXPECT_EQ(a.rdev_minor, 1u);
  EXPECT_EQ(a.space_avail, 21u);
  EXPECT_EQ(a.space_free, 22u);
  EXPECT_EQ(a.space_total, 23u);
  EXPECT_EQ(a.space_used, 8192u);
  EXPECT_EQ(a.atime.sec, 100);
  EXPECT_EQ(a.atime.nsec, 1u);
  EXPECT_EQ(a.mtime.sec, 200);
  EXPECT_EQ(a.ctime.sec, 300);
  EXPECT_EQ(a.ctime.nsec, 3u);
  EXPECT_EQ(a.mounted_on_fileid, 77u);
  uint64_t all = kAttrsObject | kAttrsStatfs | kAttrLeaseTime | kAttrMaxRead |
                 kAttrMaxWrite | kAttrMountedOnFileid | kAttrRdattrError |
                 kAttrSupported | kAttrMaxName | kAttrMaxLink |
                 kAttrMaxFileSize;
  EXPECT_EQ(a.mask, all);
}

TEST(AttrsTest, SkipsAttributesWeDoNotKeep) {
  AttrlistBuilder b;
  b.Bit(2).U32(0);                                            // fh_expire_type
  b.Bit(4).U64(5);                                            // size
  b.Bit(12).U32(1).U32(0).U32(0).U32(0).Opaque("EVERYONE@");  // acl
  b.Bit(32).Opaque("text/plain");                             // mimetype
  b.Bit(51).U64(0).U32(1000);                                 // time_delta
  Attrs a;
  ASSERT_TRUE(b.Decode(&a));
  EXPECT_EQ(a.mask, uint64_t(kAttrSize));
  EXPECT_EQ(a.size, 5u);
}

TEST(AttrsTest, RejectsTruncatedAndTrailingBytes) {
  AttrlistBuilder truncated;
  truncated.Bit(4).U32(0);  // size needs 8 bytes
  Attrs a;
  EXPECT_FALSE(truncated.Decode(&a));

  AttrlistBuilder trailing;
  trailing.Bit(4).U64(1).U32(99);
  EXPECT_FALSE(trailing.Decode(&a));

  AttrlistBuilder unknown;
  unknown.Bit(60).U32(0);
  EXPECT_FALSE(unknown.Decode(&a));

  AttrlistBuilder huge_owner;
  huge_owner.Bit(36).U32(1u << 30);
  EXPECT_FALSE(huge_owner.Decode(&a));
}

TEST(AttrsTest, SettableRoundTrip) {
  Attrs in;
  in.mask = kAttrSize | kAttrMode | kAttrOwner | kAttrOwnerGroup |
            kAttrFileid /* not settable: ignored */;
  in.size = 1 << 20;
  in.mode = 0640;
  in.uid = 1000;
  in.gid = 1001;
  std::vector<uint32_t> bitmap;
  std::string list;
  EncodeSettableAttrs(in, &bitmap, &list);
  ASSERT_EQ(bitmap.size(), 2u);
  EXPECT_EQ(bitmap[0], 1u << 4);
  EXPECT_EQ(bitmap[1], (1u << 1) | (1u << 4) | (1u << 5));
  Attrs out;
  ASSERT_TRUE(DecodeAttrs(bitmap.data(), bitmap.size(), list.data(),
                          list.size(), &out, nullptr));
  EXPECT_EQ(out.mask, kAttrSize | kAttrMode | kAttrOwner | kAttrOwnerGroup);
  EXPECT_EQ(out.size, in.size);
  EXPECT_EQ(out.mode, in.mode);
  EXPECT_EQ(out.uid, in.uid);
  EXPECT_EQ(out.gid, in.gid);
}

TEST(AttrsTest, SetTimesClientAndServer) {
  Attrs in;
  in.mask = kAttrAtime | kAttrMtime;
  in.atime_server = true;
  in.mtime.sec = 1700000000;
  in.mtime.nsec = 5;
  std::vector<uint32_t> bitmap;
  std::string list;
  EncodeSettableAttrs(in, &bitmap, &list);
  ASSERT_EQ(bitmap.size(), 2u);
  EXPECT_EQ(bitmap[1], (1u << (48 - 32)) | (1u << (54 - 32)));
  // atime: SET_TO_SERVER_TIME4 (4 bytes); mtime: SET_TO_CLIENT_TIME4 + time.
  ASSERT_EQ(list.size(), 4u + 4u + 12u);
  EXPECT_EQ(list.substr(0, 4), std::string("\0\0\0\0", 4));
  EXPECT_EQ(list.substr(4, 4), std::string("\0\0\0\1", 4));
}

TEST(AttrsTest, RequestBitmap) {
  std::vector<uint32_t> b = AttrRequestBitmap(kAttrType | kAttrMtime, true);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (1u << 1) | (1u << 19));
  EXPECT_EQ(b[1], 1u << (53 - 32));
  EXPECT_TRUE(AttrRequestBitmap(0, false).empty());
  EXPECT_EQ(BitmapToAttrMask(b.data(), b.size()), kAttrType | kAttrMtime);
}

// owner and owner_group as given, in an attrlist of their own.
AttrlistBuilder Owners(const std::string &owner, const std::string &group) {
  AttrlistBuilder b;
  b.Bit(36).Opaque(owner).Bit(37).Opaque(group);
  return b;
}

TEST(AttrsTest, OwnerNamesDecodeThroughTheCodec) {
  std::unique_ptr<IdMapper> mapper = testing_util::NewFakeMapper();
  OwnerCodec codec(OwnerFormat::kAuto, mapper.get());
  Attrs a;
  ASSERT_TRUE(Owners("alice@example.org", "staff@example.org")
                  .Decode(&a, nullptr, &codec));
  EXPECT_EQ(a.uid, 1000u);
  EXPECT_EQ(a.gid, 3000u);
  EXPECT_EQ(a.mask, kAttrOwner | kAttrOwnerGroup) << "both mapped";
  EXPECT_TRUE(codec.SendsNames()) << "auto learned names from the remote";
}

TEST(AttrsTest, AnUnmappableOwnerIsNobodyAndMarked) {
  std::unique_ptr<IdMapper> mapper = testing_util::NewFakeMapper();
  OwnerCodec codec(OwnerFormat::kAuto, mapper.get());
  Attrs a;
  ASSERT_TRUE(Owners("carol@example.org", "3000").Decode(&a, nullptr, &codec));
  EXPECT_EQ(a.uid, kNobodyId);
  EXPECT_EQ(a.gid, 3000u);
  EXPECT_EQ(a.mask, kAttrOwner | kAttrOwnerGroup | kAttrOwnerUnmapped);
  EXPECT_FALSE(OwnerIs(a, kNobodyId)) << "nobody does not own it";
  EXPECT_TRUE(GroupIs(a, 3000));
  ASSERT_TRUE(Owners("1000", "carols@example.org").Decode(&a, nullptr, &codec));
  EXPECT_EQ(a.mask, kAttrOwner | kAttrOwnerGroup | kAttrGroupUnmapped);
  EXPECT_EQ(a.gid, kNobodyId);
  EXPECT_FALSE(GroupIs(a, kNobodyId));
  // Without a codec, every name is unmappable.
  ASSERT_TRUE(Owners("alice@example.org", "staff@example.org").Decode(&a));
  EXPECT_EQ(a.mask, kAttrOwner | kAttrOwnerGroup | kAttrOwnerUnmapped |
                        kAttrGroupUnmapped);
  // Nobody by number is the remote's own nobody: owner of its files.
  ASSERT_TRUE(Owners("65534", "65534").Decode(&a, nullptr, &codec));
  EXPECT_EQ(a.mask, kAttrOwner | kAttrOwnerGroup);
  EXPECT_TRUE(OwnerIs(a, kNobodyId));
}

TEST(AttrsTest, OwnersGoOutInTheCodecsFormat) {
  std::unique_ptr<IdMapper> mapper = testing_util::NewFakeMapper();
  OwnerCodec names(OwnerFormat::kNames, mapper.get());
  Attrs in;
  in.mask = kAttrMode | kAttrOwner | kAttrOwnerGroup;
  in.mode = 0640;
  in.uid = 1000;
  in.gid = 3000;
  std::vector<uint32_t> bitmap;
  std::string list;
  EncodeSettableAttrs(in, &bitmap, &list, &names);
  EXPECT_NE(list.find("alice@example.org"), std::string::npos);
  EXPECT_NE(list.find("staff@example.org"), std::string::npos);
  Attrs out;
  ASSERT_TRUE(DecodeAttrs(bitmap.data(), bitmap.size(), list.data(),
                          list.size(), &out, nullptr, &names));
  EXPECT_EQ(out.uid, 1000u);
  EXPECT_EQ(out.gid, 3000u);
  EXPECT_EQ(out.mode, 0640u);
  // Numeric: as before.
  OwnerCodec numeric(OwnerFormat::kNumeric, mapper.get());
  EncodeSettableAttrs(in, &bitmap, &list, &numeric);
  EXPECT_EQ(list.find("alice"), std::string::npos);
  EXPECT_NE(list.find("1000"), std::string::npos);
}

TEST(AttrsTest, NumericOwners) {
  EXPECT_EQ(ParseNumericOwner("1000"), 1000u);
  EXPECT_EQ(ParseNumericOwner("0"), 0u);
  EXPECT_EQ(ParseNumericOwner("1000@localdomain"), 1000u);
  EXPECT_EQ(ParseNumericOwner("4294967295"), 4294967295u);
  EXPECT_EQ(ParseNumericOwner("4294967296"), kNobodyId);
  EXPECT_EQ(ParseNumericOwner("alice@example.org"), kNobodyId);
  EXPECT_EQ(ParseNumericOwner("alice"), kNobodyId);
  EXPECT_EQ(ParseNumericOwner(""), kNobodyId);
  EXPECT_EQ(ParseNumericOwner("@example.org"), kNobodyId);
  EXPECT_EQ(ParseNumericOwner("-1"), kNobodyId);
  EXPECT_EQ(ParseNumericOwner("12a"), kNobodyId);
  EXPECT_EQ(FormatNumericOwner(1000), "1000");
}

}  // namespace
}  // namespace upstream
}  // namespace nache
